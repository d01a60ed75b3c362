"""Offline tools that look into a query's checkpoint: `sparkstate verify` (and its roll-back)."""
from .verify import VerifyReport, apply_rollback, format_report, rollback_plan, verify_checkpoint

__all__ = ["VerifyReport", "apply_rollback", "format_report", "rollback_plan", "verify_checkpoint"]
