"""kafkasim: a Kafka partitioning simulator with a segmented on-disk log.

Everything imports as ``kafkasim.<part>``. The short public API is here, lazily (so
``import kafkasim.errors`` stays cheap and free of side effects)::

    from kafkasim import Broker, Producer, Consumer, TopicPartition, MockClock
    from kafkasim import KafkaProducer, KafkaConsumer     # kafka-python's names, same classes

    broker = Broker("./kafkasim-data", clock=MockClock())
    broker.create_topic("orders", partitions=6)

The layers, top to bottom (``lint-imports`` enforces them; see README "Architecture"):
``cli`` | ``scenarios``, ``demo`` | ``spark_jobs`` | ``producer``, ``consumer`` |
``broker`` | ``coordinator`` | ``storage`` | shared pure parts (``records``,
``partitioning``, ``assignors``, ``protocol``) | vocabulary (``errors``, ``clock``,
``types``, ``config``).
"""

from kafkasim._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Broker": "kafkasim.broker.broker",
    "Cluster": "kafkasim.broker.cluster",
    "Producer": "kafkasim.producer.producer",
    "Consumer": "kafkasim.consumer.consumer",
    "KafkaConsumer": "kafkasim.consumer.consumer",
    "ShareConsumer": "kafkasim.consumer.share_consumer",
    "KafkaProducer": "kafkasim.producer.producer",
    "ConsumerRecord": "kafkasim.consumer.fetcher",
    "ConsumerRebalanceListener": "kafkasim.consumer.group_member",
    "RecordMetadata": "kafkasim.producer.future",
    "TopicPartition": "kafkasim.types",
    "OffsetAndMetadata": "kafkasim.types",
    "OffsetAndTimestamp": "kafkasim.types",
    "MockClock": "kafkasim.clock",
    "SystemClock": "kafkasim.clock",
    "KafkaSimError": "kafkasim.errors",
}

__all__ = ["__version__", *_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
