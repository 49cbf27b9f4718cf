"""vLLM's `/kv_event_sources` body from the replicas' GetKvEventSources (pipeline_svc/faces/vllm_server.py's table):
the shape vLLM 0.33 serves (KVEventsConfig per rank), one rank per replica that publishes, wildcards resolved."""

from __future__ import annotations

from dataclasses import asdict, fields

from engine_svc.serving.vllm_kv_events.config import KVEventsConfig, parse
from pipeline_svc.faces.vllm_server import KV_EVENT_SOURCE, kv_event_sources
from scaleout.v1 import kv_events_pb2


def test_every_key_of_vllms_config_and_each_replicas_host():
    assert list(KV_EVENT_SOURCE) == [f.name for f in fields(KVEventsConfig)]
    config = parse('{"enable_kv_cache_events": true, "endpoint": "tcp://*:5557", "topic": "kv"}')
    source = kv_events_pb2.KvEventSource(**asdict(config))
    body = kv_event_sources([("10.0.0.7:50052", source), ("[::1]:50053", source)])
    assert body["0"] == asdict(config) | {"endpoint": "tcp://10.0.0.7:5557"}
    assert body["1"]["endpoint"] == "tcp://[::1]:5557" and body["1"]["replay_endpoint"] is None
    assert kv_event_sources([]) == {}
