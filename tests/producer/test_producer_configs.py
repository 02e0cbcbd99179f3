"""Producer configs go through kafkasim.config's one mechanism: names, defaults, wording, ignored ones."""

from __future__ import annotations

import warnings

import pytest

from kafkasim.config import IgnoredConfigWarning
from kafkasim.errors import InvalidConfigurationError
from kafkasim.producer import Producer
from kafkasim.producer.config import PRODUCER_CONFIGS

# kafka-python's KafkaProducer configs that mean nothing without a network (a sample of the list)
NETWORK_ONLY = {
    "bootstrap_servers": "kafka-1:9092", "request_timeout_ms": 30_000, "max_block_ms": 60_000,
    "security_protocol": "SASL_SSL", "api_version": (3, 7),
    "connections_max_idle_ms": 540_000, "send_buffer_bytes": 131_072, "receive_buffer_bytes": 32_768,
    "reconnect_backoff_ms": 50, "sasl_mechanism": "PLAIN", "sasl_plain_username": "u",
    "sasl_plain_password": "p", "ssl_cafile": "/etc/ca.pem", "ssl_check_hostname": False,
}


def test_an_unknown_name_names_its_close_matches(broker, clock):
    with pytest.raises(InvalidConfigurationError,
                       match=r"^Unrecognized producer config 'linger_m' \(did you mean 'linger_ms'\?\)$"):
        Producer(broker, clock=clock, linger_m=5)
    with pytest.raises(InvalidConfigurationError,
                       match=r"Unrecognized producer configs 'acsk' \(did you mean 'acks'\?\), 'zzz'$"):
        Producer(broker, clock=clock, acsk=1, zzz=2)


@pytest.mark.parametrize("name, value, why", [
    ("linger_ms", -1, "Value must be at least 0"),
    ("batch_size", "big", "Expected value to be a 32-bit integer"),
    ("max_in_flight_requests_per_connection", 0, "Value must be at least 1"),
    ("acks", 2, "String must be one of: all, -1, 0, 1"),
    ("fault_rate", 1.5, "Value must be no more than 1"),
    ("fault_mode", "lost", "String must be one of: lost_request, lost_response"),
    ("enable_idempotence", "maybe", "Expected value to be either true or false"),
    ("compression_type", "brotli", "String must be one of: gzip, snappy, lz4, zstd"),
    ("seed", (42, 1), "Expected None, an integer, a number, a string or bytes (what random.Random takes)"),
])
def test_bad_values_are_rejected_with_kafkas_wording(broker, clock, name, value, why):
    with pytest.raises(InvalidConfigurationError,
                       match=f"^Invalid value {value!r} for configuration {name}: {why}$".replace("(", r"\(").replace(")", r"\)")):
        Producer(broker, clock=clock, **{name: value})


def test_kafka_python_network_configs_are_accepted_with_one_warning(broker, clock):
    broker.create_topic("t", partitions=1)
    with pytest.warns(IgnoredConfigWarning) as caught:
        p = Producer(broker, clock=clock, linger_ms=0, **NETWORK_ONLY)
    assert len(caught) == 1                                          # ONE warning ...
    message = str(caught[0].message)
    assert all(name in message for name in NETWORK_ONLY)             # ... naming every ignored config
    assert "linger_ms" not in message
    assert caught[0].filename == __file__                            # points at the caller
    assert p.config["bootstrap_servers"] == "kafka-1:9092"
    assert p.send("t", value=b"v").get().offset == 0                 # and the producer works as before


def test_no_warning_without_ignored_configs(broker, clock):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Producer(broker, clock=clock, linger_ms=0, acks=1, client_id="quiet")


def test_the_definitions_carry_kafkas_defaults_and_docs():
    d = PRODUCER_CONFIGS
    assert (d["acks"].default, d["batch_size"].default, d["linger_ms"].default,
            d["delivery_timeout_ms"].default) == ("all", 16384, 5, 120_000)
    assert d["acks"].choices == ("all", "-1", "0", "1")
    assert all(not d[n].applied for n in NETWORK_ONLY) and d["linger_ms"].applied
    assert all(x.doc for x in d.values())


def test_kafka_style_strings_parse_like_topic_configs(broker, clock):
    p = Producer(broker, clock=clock, linger_ms="7", acks="1", enable_idempotence="false")
    assert (p.config["linger_ms"], p.config["acks"], p.idempotent) == (7, "1", False)


# kafka-python 2.x KafkaProducer.DEFAULT_CONFIG (kafka/producer/kafka.py), names only
KAFKA_PYTHON_PRODUCER_CONFIGS = """bootstrap_servers client_id key_serializer value_serializer
enable_idempotence delivery_timeout_ms acks bootstrap_topics_filter compression_type retries batch_size
linger_ms partitioner buffer_memory connections_max_idle_ms max_block_ms max_request_size
allow_auto_create_topics metadata_max_age_ms retry_backoff_ms request_timeout_ms receive_buffer_bytes
send_buffer_bytes socket_options sock_chunk_bytes sock_chunk_buffer_count reconnect_backoff_ms
reconnect_backoff_max_ms max_in_flight_requests_per_connection security_protocol ssl_context
ssl_check_hostname ssl_cafile ssl_certfile ssl_keyfile ssl_crlfile ssl_password ssl_ciphers api_version
api_version_auto_timeout_ms metric_reporters metrics_enabled metrics_num_samples metrics_sample_window_ms
selector sasl_mechanism sasl_plain_username sasl_plain_password sasl_kerberos_name
sasl_kerberos_service_name sasl_kerberos_domain_name sasl_oauth_token_provider socks5_proxy
kafka_client""".split()


@pytest.mark.parametrize("codec, attr", [(None, 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)])
def test_compression_type_compresses_the_batches_sent(broker, clock, codec, attr):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, compression_type=codec)
    p.send("t", b"v" * 500, key=b"k")
    p.flush()
    (h, raw), = broker.log("t", 0).read_batches(0)
    assert h.attributes & 0x07 == attr
    assert (len(raw) < 200) == (codec is not None)
    assert broker.fetch("t", 0, 0).records[0].value == b"v" * 500


def test_every_kafka_python_producer_config_is_known_and_applied_with_transactions():
    from kafkasim.producer.config import PRODUCER_CONFIGS
    assert [n for n in KAFKA_PYTHON_PRODUCER_CONFIGS + ["transactional_id", "transaction_timeout_ms"]
            if n not in PRODUCER_CONFIGS] == []
    assert PRODUCER_CONFIGS["transactional_id"].applied and PRODUCER_CONFIGS["transactional_id"].default is None
    assert PRODUCER_CONFIGS["transaction_timeout_ms"].default == 60_000
