"""The main job (``make demo`` = ``kafkasim demo``): the whole story on the embedded defaults.

Modules, one job each: ``story`` (run_demo: the order of the story, the shop's topic, the
Spark audits, the summary), ``cluster_story`` (the cluster: racks, failure, reassignment),
``wire`` (a real client through ``kafkasim serve``), ``traffic`` (Zipf keys, producing, a
group that settles). Importing this package is cheap: ``run_demo`` loads on first use.
"""

from kafkasim._lazy import lazy_exports

__all__ = ["run_demo", "MARKER"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "run_demo": "kafkasim.demo.story",
    "MARKER": "kafkasim.demo.story",
})
