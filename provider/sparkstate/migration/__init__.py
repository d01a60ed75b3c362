"""Moving a stopped query's state between state store providers (Spark's HDFS and RocksDB providers and
sparkstate), in both directions: `sparkstate migrate` and `sparkstate.migrate()`."""
from .plan import PROVIDERS, MigrationPlan, build_plan
from .runner import MigrationSummary, migrate

__all__ = ["PROVIDERS", "MigrationPlan", "MigrationSummary", "build_plan", "migrate"]
