"""kafkasim.records: the record batch format of storage/FORMAT.md (shared pure layer).

``record_batch`` is the one codec every reader and writer uses (storage, producer,
consumer, Spark); ``_codec`` is its optional C fast path. Pure: no files, no state
beyond module constants; safe from any thread. Imports only the vocabulary.
"""
