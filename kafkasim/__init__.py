"""kafkasim: a single-process Kafka partitioning simulator with a segmented on-disk log.

This package is the shared vocabulary (errors, Clock, TopicPartition, configs) that
every layer imports, plus the CLI front door (``kafkasim.cli``) which imports everything.
The vocabulary modules import nothing of ours and have no side effects.
"""

__version__ = "0.1.0"
