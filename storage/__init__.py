"""storage: the segmented on-disk log (FORMAT.md is the contract).

Modules, bottom up: ``layout`` (names on disk), ``record_batch`` (batch bytes),
``index`` (offset and time indexes), ``segment`` (one .log + its indexes),
``log`` (one partition: a sequence of segments), ``cleaner`` (retention and
compaction). Nothing here imports broker, coordinator, producer or consumer.
"""
