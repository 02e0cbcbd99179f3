"""consumer: kafka-python's KafkaConsumer over the in-process broker.

Modules: ``subscription`` (what is subscribed/assigned, positions), ``fetcher``
(records from the broker), ``group_member`` (the group protocol, client side),
``consumer`` (the ``Consumer`` facade). Talks only to the broker API.
"""

from consumer.consumer import DEFAULT_CONFIG, Consumer
from consumer.fetcher import ConsumerRecord
from consumer.group_member import ConsumerRebalanceListener, MemberState

__all__ = ["Consumer", "ConsumerRecord", "ConsumerRebalanceListener", "MemberState", "DEFAULT_CONFIG"]
