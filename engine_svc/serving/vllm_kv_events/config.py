"""`--kv-events-config`: vLLM's KVEventsConfig as JSON (vLLM 0.33, `vllm/config/kv_events.py`), same keys and
defaults; an unknown key or a publisher other than "null" / "zmq" is refused at start. `sources` is the body of
vLLM's `GET /kv_event_sources`: the resolved config per data-parallel rank (one rank here, "0"), `{}` when off.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields


@dataclass
class KVEventsConfig:
    enable_kv_cache_events: bool = False
    publisher: str | None = None  # None: "zmq" when enabled, else "null" (as vLLM)
    endpoint: str = "tcp://*:5557"
    replay_endpoint: str | None = None
    buffer_steps: int = 10_000
    hwm: int = 100_000
    max_queue_size: int = 100_000
    topic: str = ""

    def __post_init__(self) -> None:
        if self.publisher is None:
            self.publisher = "zmq" if self.enable_kv_cache_events else "null"
        if self.publisher not in ("null", "zmq"):
            raise ValueError(f"--kv-events-config: unknown publisher {self.publisher!r} (null, zmq)")

    @property
    def zmq(self) -> bool:
        return self.enable_kv_cache_events and self.publisher == "zmq"


def parse(text: str | None) -> KVEventsConfig:
    if not text:
        return KVEventsConfig()
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("--kv-events-config: a JSON object")
    unknown = sorted(set(raw) - {f.name for f in fields(KVEventsConfig)})
    if unknown:
        raise ValueError(f"--kv-events-config: unknown keys {', '.join(unknown)}")
    return KVEventsConfig(**raw)


def sources(config: KVEventsConfig | None) -> dict[str, dict]:
    return {"0": asdict(config)} if config is not None and config.enable_kv_cache_events else {}


def add_flags(parser) -> None:
    parser.add_argument(
        "--kv-events-config",
        default="",
        help="vLLM's KV-event publisher config as JSON (enable_kv_cache_events, publisher, endpoint, "
        "replay_endpoint, buffer_steps, hwm, max_queue_size, topic); enabling it also turns on --kv-events",
    )
    parser.add_argument(
        "--kv-events",
        action="store_true",
        help="publish KV-cache events (EngineControlService.SubscribeKvEvents); costs a little per step",
    )
