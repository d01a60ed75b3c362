"""Offline tools that look into a query's checkpoint: `sparkstate verify` (and its roll-back) and
`sparkstate inspect` (what the state holds, and how it would balance after a rescale)."""
from .inspect import InspectReport, inspect_checkpoint, report_document
from .verify import VerifyReport, apply_rollback, format_report, rollback_plan, verify_checkpoint

__all__ = ["InspectReport", "VerifyReport", "apply_rollback", "format_report", "inspect_checkpoint",
           "report_document", "rollback_plan", "verify_checkpoint"]
