"""kafkasim.storage: the segmented on-disk log (FORMAT.md is the contract).

Modules, bottom up: ``layout`` (names on disk), ``index`` (offset and time indexes),
``segment`` (one .log + its indexes), ``log`` (one partition: a sequence of segments;
recovery, retention, compaction), ``cleaner`` (the background retention/compaction
thread) and ``inspection`` (dump-log and verify-log). The batch bytes themselves are
the shared pure layer :mod:`kafkasim.records` (the one codec every reader uses).
Nothing here imports broker, coordinator, producer or consumer; this ``__init__``
imports nothing, so ``kafkasim.storage.layout`` stays light for Spark executors.
"""
