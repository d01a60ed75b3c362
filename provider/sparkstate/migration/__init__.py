"""Moving a stopped query's state between state store providers (Spark's HDFS and RocksDB providers and
sparkstate), in both directions: `sparkstate migrate` and `sparkstate.migrate()`."""
from .plan import PROVIDERS, MigrationPlan, build_plan
from .runner import MigrationSummary, migrate
from .with_rescale import MigrateAndRescaleSummary, migrate_and_rescale

__all__ = ["PROVIDERS", "MigrateAndRescaleSummary", "MigrationPlan", "MigrationSummary", "build_plan", "migrate",
           "migrate_and_rescale"]
