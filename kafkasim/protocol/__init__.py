"""kafkasim.protocol: protocol facts shared by the broker side and the client side (pure layer).

- ``group`` — the classic group protocol's message shapes and sentinels.
- ``consumer_group`` — the consumer protocol's (KIP-848) heartbeat request/response and epochs.
- ``offsets`` — the ``__consumer_offsets`` record schema (keys, values, partition of a group).

Pure data and codecs; imports only the vocabulary.
"""
