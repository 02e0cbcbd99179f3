"""kafkasim.consumer: kafka-python's KafkaConsumer over the in-process broker.

Modules: ``subscription`` (what is subscribed/assigned, positions), ``fetcher``
(records from the broker), ``group_member`` (the group protocol, client side; the
message shapes come from :mod:`kafkasim.protocol.group`), ``config`` (the consumer's
configs as ``ConfigDef``s), ``consumer`` (the ``Consumer`` facade); share groups
(KIP-932): ``share_consumer`` (the ``ShareConsumer`` facade), ``share_membership``
(ShareGroupHeartbeat), ``share_fetch`` (acquired records out of stored batches),
``share_config``. Talks only to the broker API. Exports are lazy.
"""

from kafkasim._lazy import lazy_exports

_EXPORTS = {
    "Consumer": "kafkasim.consumer.consumer",
    "KafkaConsumer": "kafkasim.consumer.consumer",
    "DEFAULT_CONFIG": "kafkasim.consumer.config",
    "ConsumerRecord": "kafkasim.consumer.fetcher",
    "ConsumerRebalanceListener": "kafkasim.consumer.group_member",
    "MemberState": "kafkasim.consumer.group_member",
    "ShareConsumer": "kafkasim.consumer.share_consumer",
    "KafkaShareConsumer": "kafkasim.consumer.share_consumer",
    "AcknowledgeType": "kafkasim.consumer.share_consumer",
    "ShareConsumerRecord": "kafkasim.consumer.share_fetch",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
