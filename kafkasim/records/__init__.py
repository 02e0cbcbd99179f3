"""kafkasim.records: the record batch format of storage/FORMAT.md (shared pure layer).

Modules, bottom up: ``validation`` (what a record is: the one record rule every entry
point checks with), ``framing`` (the batch header, the CRC, and the one batch iterator
every reader walks a segment with), ``record_batch`` (the records payload: the one
encoder family and the decoders; re-exports ``framing``'s names) and ``columns``
(payloads decoded into Arrow buffers for columnar readers); ``_codec`` is the optional
C fast path of the last two. Pure: no files, no state beyond module constants; safe from
any thread. Imports only the vocabulary.
"""
