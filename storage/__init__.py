"""kafkasim.storage: the segmented on-disk log (FORMAT.md is the contract).

Modules, bottom up (an import-linter ``layers`` contract in pyproject.toml keeps every
import pointing down): ``files`` (OSError translation, atomic writes), ``layout`` (names
on disk), ``index`` (offset and time indexes), ``txn_index`` (the aborted-transaction
index) and ``producer_snapshot`` (producer state snapshots), ``segment`` (one .log + its indexes),
``segments`` (the map of segments by base offset), ``checkpoints`` (recovery point,
shutdown marker, cleaner checkpoint) and ``recovery`` (opening the active segment), then
``loader`` (opening a directory),
``validation`` (what an append must pass), ``fetch`` (decoding what a read fetched) and
``compaction`` (rewriting closed segments), then ``log`` (one partition: offsets, appends,
reads, retention, compaction), and on top ``cleaner`` (the background retention/compaction
thread) and ``inspection`` (dump-log and verify-log). The batch bytes themselves are
the shared pure layer :mod:`kafkasim.records` (one header parser, one batch iterator, one
encoder). Nothing here imports broker, coordinator, producer or consumer; this
``__init__`` imports nothing, so ``kafkasim.storage.layout`` stays light for Spark executors.
"""
