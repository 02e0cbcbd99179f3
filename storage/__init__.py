"""storage: the segmented on-disk log (FORMAT.md is the contract).

Modules, bottom up: ``layout`` (names on disk), ``record_batch`` (batch bytes, the one
codec every reader uses), ``index`` (offset and time indexes), ``segment`` (one .log +
its indexes), ``log`` (one partition: a sequence of segments; recovery, retention,
compaction), ``cleaner`` (the background retention/compaction thread) and ``inspect``
(dump-log and verify-log). Nothing here imports broker, coordinator, producer or consumer.
"""
