"""Consumer configs go through kafkasim.config's one mechanism: names, defaults, wording, ignored ones."""

from __future__ import annotations

import warnings

import pytest

from kafkasim.config import KAFKA_PYTHON_UNAPPLIED, IgnoredConfigWarning
from kafkasim.consumer import Consumer
from kafkasim.consumer.config import CONSUMER_CONFIGS
from kafkasim.errors import InvalidConfigurationError
from kafkasim.types import TopicPartition

NETWORK_ONLY = {
    "bootstrap_servers": ["kafka-1:9092", "kafka-2:9092"], "fetch_min_bytes": 1024,
    "fetch_max_wait_ms": 100,
    "request_timeout_ms": 305_000, "security_protocol": "SSL", "ssl_certfile": "/etc/c.pem",
    "sasl_mechanism": "SCRAM-SHA-512", "api_version": (2, 8), "check_crcs": False,
}


def test_an_unknown_name_names_its_close_matches(broker):
    with pytest.raises(InvalidConfigurationError,
                       match=r"^Unrecognized consumer config 'auto_offset_rest' "
                             r"\(did you mean 'auto_offset_reset'\?\)$"):
        Consumer(broker, auto_offset_rest="earliest")


@pytest.mark.parametrize("name, value, why", [
    ("auto_offset_reset", "smallest", "String must be one of: latest, earliest, none"),
    ("max_poll_records", 0, "Value must be at least 1"),
    ("session_timeout_ms", "long", "Expected value to be a 32-bit integer"),
    ("enable_auto_commit", "yes", "Expected value to be either true or false"),
    ("isolation_level", "dirty", "String must be one of: read_uncommitted, read_committed"),
])
def test_bad_values_are_rejected_with_kafkas_wording(broker, name, value, why):
    with pytest.raises(InvalidConfigurationError,
                       match=f"^Invalid value {value!r} for configuration {name}: {why}$"):
        Consumer(broker, **{name: value})


def test_kafka_python_network_configs_are_accepted_with_one_warning(broker, clock):
    broker.create_topic("t", partitions=1)
    broker.append_records("t", 0, [(clock.now_ms(), b"k", b"v", ())])
    with pytest.warns(IgnoredConfigWarning) as caught:
        c = Consumer(broker, auto_offset_reset="earliest", **NETWORK_ONLY)
    assert len(caught) == 1
    assert all(name in str(caught[0].message) for name in NETWORK_ONLY)
    c.assign([TopicPartition("t", 0)])
    assert [r.value for r in c.poll()[TopicPartition("t", 0)]] == [b"v"]


def test_no_warning_without_ignored_configs(broker):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Consumer(broker, group_id="g", auto_offset_reset="earliest", max_poll_records=10)


def test_one_list_of_ignored_kafka_python_configs_serves_both_clients():
    from kafkasim.producer.config import PRODUCER_CONFIGS
    shared = {d.name for d, clients in KAFKA_PYTHON_UNAPPLIED if clients == ("producer", "consumer")}
    assert {"bootstrap_servers", "security_protocol", "ssl_cafile", "sasl_mechanism"} <= shared
    for name in shared:
        assert not PRODUCER_CONFIGS[name].applied and not CONSUMER_CONFIGS[name].applied
    assert CONSUMER_CONFIGS["fetch_min_bytes"].default == 1 and not CONSUMER_CONFIGS["fetch_min_bytes"].applied
    assert "fetch_min_bytes" not in PRODUCER_CONFIGS and "max_block_ms" not in CONSUMER_CONFIGS


def test_client_rack_is_a_real_config_stored_without_a_warning(broker):
    """client_rack (Kafka's client.rack) is kept for rack-aware fetching and assignment."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = Consumer(broker, client_rack="rack-a")
    assert c.config["client_rack"] == "rack-a"
    assert Consumer(broker).config["client_rack"] == "" and CONSUMER_CONFIGS["client_rack"].applied


# kafka-python 2.x KafkaConsumer.DEFAULT_CONFIG (kafka/consumer/group.py), names only
KAFKA_PYTHON_CONSUMER_CONFIGS = """bootstrap_servers client_id group_id group_instance_id key_deserializer
value_deserializer enable_incremental_fetch_sessions fetch_max_wait_ms fetch_min_bytes fetch_max_bytes
max_partition_fetch_bytes request_timeout_ms retry_backoff_ms reconnect_backoff_ms reconnect_backoff_max_ms
max_in_flight_requests_per_connection auto_offset_reset enable_auto_commit auto_commit_interval_ms
default_offset_commit_callback check_crcs isolation_level allow_auto_create_topics metadata_max_age_ms
partition_assignment_strategy max_poll_records max_poll_interval_ms session_timeout_ms
heartbeat_interval_ms receive_buffer_bytes send_buffer_bytes socket_options sock_chunk_bytes
sock_chunk_buffer_count consumer_timeout_ms security_protocol ssl_context ssl_check_hostname ssl_cafile
ssl_certfile ssl_keyfile ssl_crlfile ssl_password ssl_ciphers api_version api_version_auto_timeout_ms
connections_max_idle_ms metric_reporters metrics_enabled metrics_num_samples metrics_sample_window_ms
metric_group_prefix selector exclude_internal_topics sasl_mechanism sasl_plain_username
sasl_plain_password sasl_kerberos_name sasl_kerberos_service_name sasl_kerberos_domain_name
sasl_oauth_token_provider socks5_proxy kafka_client client_rack legacy_iterator""".split()


def test_every_kafka_python_consumer_config_is_known():
    assert [n for n in KAFKA_PYTHON_CONSUMER_CONFIGS if n not in CONSUMER_CONFIGS] == []
