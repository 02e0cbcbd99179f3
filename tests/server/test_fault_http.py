"""The fault control endpoint over HTTP (kafkasim.server.fault_http, ``kafkasim serve
--control-port``): it conforms to its OpenAPI document (schemathesis against a real served
process), refuses non-loopback binds unless told otherwise, refuses malformed rules with a 400
naming the field, answers 404/405 as documented, and lists rules with their hit counts."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from kafkasim.clock import MockClock
from kafkasim.errors import KAFKA_ERROR_NAMES, InvalidArgumentError
from kafkasim.faults import Faults
from kafkasim.server.address import read_address
from kafkasim.server.dispatch import APIS
from kafkasim.server.fault_http import OPENAPI_FILE, FaultHttpClient, FaultHttpServer, openapi_document
from tests.server.conftest import start_server

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http(method: str, url: str, body=None, raw: bytes | None = None) -> tuple[int, dict, dict]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with _NO_PROXY.open(request, timeout=10) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


# ------------------------------------------------------------------ a real served process

@pytest.fixture(scope="module")
def served_control(tmp_path_factory):
    """``kafkasim serve --control-port 0`` (one broker); yields its control URL."""
    served = start_server(tmp_path_factory.mktemp("fault-http") / "data", "--control-port", "0")
    try:
        yield read_address(served.data_dir)["control_url"]
    finally:
        served.stop()


# the packaged document, which a served single broker serves as it is (checked below); loaded at
# collection (schemathesis' from_fixture does not run under this pytest), the server's URL per call
schema = schemathesis.openapi.from_path(OPENAPI_FILE)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=40, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_the_endpoint_conforms_to_its_openapi_document(case, served_control):
    # every check: documented status codes, response schemas and content types, no 5xx, valid
    # rules accepted and invalid ones refused, 405 with Allow for undocumented methods
    case.call_and_validate(base_url=served_control)


def test_the_served_document_is_the_packaged_file_and_names_every_api_and_kafka_error(served_control):
    status, doc, _ = _http("GET", served_control + "/openapi.json")
    with open(OPENAPI_FILE) as f:
        assert (status, doc) == (200, json.load(f))
    rule = doc["components"]["schemas"]["FaultRuleInput"]["properties"]
    assert rule["api"]["enum"] == sorted(a.name for a in APIS.values())
    names, codes = (alt["enum"] for alt in rule["error"]["oneOf"])
    assert sorted(names) == sorted(n for c, n in KAFKA_ERROR_NAMES.items() if c)
    assert sorted(codes) == sorted(c for c in KAFKA_ERROR_NAMES if c)


def test_a_served_process_adds_lists_and_removes_rules(served_control):
    _http("DELETE", served_control + "/faults")
    status, rule, headers = _http("POST", served_control + "/faults",
                                  {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 3,
                                   "topic": "orders", "partition": 0})
    assert status == 201 and headers["Location"] == f"/faults/{rule['rule_id']}"
    assert (rule["error"], rule["error_name"], rule["count"], rule["hits"]) == (6, "NOT_LEADER_OR_FOLLOWER", 3, 0)
    assert _http("GET", served_control + "/faults")[1] == {"rules": [rule]}
    assert _http("DELETE", served_control + f"/faults/{rule['rule_id']}")[:2] == (200, rule)
    assert _http("DELETE", served_control + f"/faults/{rule['rule_id']}")[0] == 404
    assert _http("GET", served_control + "/faults")[1] == {"rules": []}


@pytest.mark.parametrize("body, field", [
    ({"api": "Produce", "error": "NOT_A_KAFKA_ERROR"}, "error"),
    ({"api": "Produce", "error": "not_leader_or_follower"}, "error"),     # the document's names only
    ({"api": "Produce", "error": 0}, "error"),
    ({"api": "Nope", "error": 6}, "api"),
    ({"error": 6, "count": 0}, "count"),
    ({"error": 6, "count": "3"}, "count"),
    ({"error": 6, "partition": -1}, "partition"),
    ({"error": 6, "probability": 1.5}, "probability"),
    ({"latency_ms": 3_600_001}, "latency_ms"),
    ({"error": 6, "drop": "during"}, "drop"),
    ({"error": 6, "drop": "after"}, "drop"),
    ({"error": 6, "topic": ""}, "topic"),
    ({"error": 6, "topic": None}, "topic"),
    ({"error": 6, "colour": "red"}, "colour"),
    ({"api": "Produce"}, None),                 # does nothing
    ([6], None),                                # not an object
])
def test_a_malformed_rule_is_a_400_naming_the_field_and_installs_nothing(served_control, body, field):
    _http("DELETE", served_control + "/faults")
    status, answer, _ = _http("POST", served_control + "/faults", body)
    assert status == 400, answer
    assert answer["error"] == "InvalidArgumentError" and answer["field"] == field, answer
    if field:
        assert field in answer["message"]
    assert _http("GET", served_control + "/faults")[1] == {"rules": []}


def test_a_body_that_is_not_json_is_a_400(served_control):
    status, answer, _ = _http("POST", served_control + "/faults", raw=b"{not json")
    assert (status, answer["field"]) == (400, None) and "JSON" in answer["message"]


def test_unknown_ids_paths_and_methods(served_control):
    assert _http("GET", served_control + "/faults/987654")[:2][0] == 404
    status, answer, _ = _http("DELETE", served_control + "/faults/abc")
    assert (status, answer["field"]) == (400, "rule_id")
    assert _http("GET", served_control + "/nothing-here")[0] == 404
    status, answer, headers = _http("PUT", served_control + "/faults", {})
    assert (status, headers["Allow"]) == (405, "GET, POST, DELETE")
    status, _, headers = _http("POST", served_control + "/faults/1", {})
    assert (status, headers["Allow"]) == (405, "GET, DELETE")


# ------------------------------------------------------------------ binding

@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "example.com"])
def test_a_non_loopback_host_is_refused_unless_allowed(host):
    with pytest.raises(InvalidArgumentError, match="allow-remote-control"):
        FaultHttpServer(Faults(), host, 0)
    FaultHttpServer(Faults(), host, 0, allow_remote=True)      # allowed: constructed (never bound here)
    for ok in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        FaultHttpServer(Faults(), ok, 0)


def test_serve_refuses_a_non_loopback_control_host_naming_it(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kafkasim", "serve", "--data-dir", str(tmp_path / "data"),
                           "--listen", "127.0.0.1:0", "--control-port", "0", "--control-host", "0.0.0.0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "--control-host 0.0.0.0" in done.stderr and "--allow-remote-control" in done.stderr
    assert not (tmp_path / "data").exists()            # refused before anything was opened


def test_serve_names_a_control_port_it_cannot_bind_and_leaves_no_address_file(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "kafkasim", "serve", "--data-dir", str(tmp_path / "data"),
                               "--listen", "127.0.0.1:0", "--control-port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and f"fault control endpoint on 127.0.0.1:{port}" in done.stderr, done.stderr
    assert read_address(str(tmp_path / "data")) is None
    assert not (tmp_path / "data" / ".server-control").exists()


# ------------------------------------------------------------------ hits (in process, over real HTTP)

def test_the_list_shows_each_rules_hits_and_expiry():
    clock = MockClock(5_000)
    faults = Faults(clock, known_apis={a.name for a in APIS.values()})
    with FaultHttpServer(faults) as http:
        client = FaultHttpClient(http.url)
        a = client.fault_add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, topic="t", partition=0)
        b = client.fault_add(api="Fetch", latency_ms=300, duration_ms=1_000)
        for _ in range(4):
            faults.decide(0, "Produce", "app", [("t", 0)])
        faults.decide(0, "Fetch", "app")
        clock.advance(1_000)
        listed = {r["rule_id"]: r for r in client.fault_list()}
        assert (listed[a["rule_id"]]["hits"], listed[a["rule_id"]]["expired"]) == (3, True)
        assert (listed[b["rule_id"]]["hits"], listed[b["rule_id"]]["expired"]) == (1, True)
        assert listed[a["rule_id"]]["created_ms"] == 5_000
        with pytest.raises(InvalidArgumentError, match="rule_id"):
            client.fault_remove(99)
        assert client.fault_clear() == 2 and not faults.active


def test_a_clusters_document_names_its_brokers_and_refuses_others():
    faults = Faults(brokers=[0, 1, 2])
    with FaultHttpServer(faults, brokers=[0, 1, 2]) as http:
        doc = _http("GET", http.url + "/openapi.json")[1]
        assert doc["components"]["schemas"]["FaultRuleInput"]["properties"]["broker"]["enum"] == [0, 1, 2]
        assert doc == openapi_document([2, 1, 0])
        status, answer, _ = _http("POST", http.url + "/faults", {"broker": 7, "error": 6})
        assert (status, answer["field"]) == (400, "broker")
        assert _http("POST", http.url + "/faults", {"broker": 2, "error": 6})[0] == 201
