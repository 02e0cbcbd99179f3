"""kafkasim.admin: Kafka's operator tools as library calls over the broker API.

- ``groups`` — ``kafka-consumer-groups``: describe (offsets, ``--members``, ``--state``),
  ``--reset-offsets`` plans and their execution, ``--delete``.
- ``offsets`` — ``kafka-get-offsets``: offsets by time (-1 latest, -2 earliest, or ms).

Each function takes a broker and returns plain data (rows as dicts); printing is the
CLI's job. Layer: a client of the broker API, beside the producer and the consumer.
"""
