"""Key-group rescaling: change the number of state partitions of a stopped sparkstate query.

`rescale(spark, checkpoint, n)` (also `sparkstate.rescale`, and `sparkstate rescale` on the command line)
plans the rescale (read-only validation, `plan.py`), runs one Spark job whose task p builds new partition p
from the old partitions' latest versions by key group (`task.py`), then writes the synthetic batch the way
Spark 4.3's offline repartition does (`runner.py`). docs/checkpoint-format.md describes what is written.
"""
from ..errors import RescaleError
from .plan import Plan, build_plan
from .runner import Progress, RescaleSummary, repair_file_sink, rescale

__all__ = ["rescale", "repair_file_sink", "build_plan", "Plan", "Progress", "RescaleSummary", "RescaleError"]
