"""The Dynamo worker's field table (engine_svc/faces/dynamo/fields.py): Dynamo's request dict onto our
GenerateRequest, refusals naming the field, our stream's messages back as Dynamo's output chunks; the KV-event
relay's calls to Dynamo's publisher (kv_relay.py); and the vLLM ZMQ face's hashes as vLLM reads them. The real
Dynamo: tests/routers/test_dynamo.py."""

from __future__ import annotations

import threading

import grpc
import pytest

from engine_svc.faces.dynamo import fields
from engine_svc.faces.dynamo.kv_relay import KvRelay, block_hash
from engine_svc.scheduling import kv_events
from engine_svc.serving.kv_hub import KvBatch
from engine_svc.serving.vllm_kv_events import wire
from scaleout.v1 import common_pb2, engine_pb2, kv_events_pb2
from scaleout_common.errors import ServiceError

# What Dynamo 1.6.1's frontend sends for an OpenAI chat with sampling, stops, logprobs and a JSON schema.
REQUEST = {
    "model": "SmolLM2-135M-Instruct",
    "token_ids": [1, 2, 3],
    "stop_conditions": {"max_tokens": 7, "stop": ["\n\n"], "stop_token_ids_hidden": [9], "min_tokens": None,
                        "stop_token_ids_visible": [11]},
    "sampling_options": {
        "n": None, "temperature": 0.5, "top_p": 0.9, "top_k": -1, "seed": 3, "frequency_penalty": 0.1,
        "guided_decoding": {"json": {"type": "object"}, "backend": None}, "use_beam_search": None,
    },
    "output_options": {"logprobs": 2, "prompt_logprobs": None, "skip_special_tokens": True},
    "eos_token_ids": [2, 5],
    "annotations": [],
    "mdc_sum": "abc",
    "routing": {"cache_salt": "s", "priority": 4, "backend_instance_id": 7, "lora_name": "adapter-a"},
    "router_config_override": None,
}  # fmt: skip


def test_a_full_request_maps_field_by_field():
    ours = fields.generate_request(REQUEST, "rid", {2}, "sha256:x")
    p = ours.sampling_params
    assert ours.request_id == "rid" and list(ours.token_ids) == [1, 2, 3] and ours.tokenizer_fingerprint == "sha256:x"
    assert not ours.HasField("n") and ours.cache_salt == "s" and ours.priority == -4  # Dynamo: higher sooner
    assert ours.lora_name == "adapter-a"
    assert p.max_tokens == 7 and not p.HasField("min_tokens") and list(p.stop) == ["\n\n"]
    assert list(p.stop_token_ids) == [
        9,
        11,
        5,
    ]  # hidden and visible stops, then the EOS id the engine does not already stop on
    assert p.temperature == 0.5 and p.top_p == pytest.approx(0.9) and not p.HasField("top_k") and p.seed == 3
    assert p.frequency_penalty == pytest.approx(0.1) and p.logprobs == 2 and not p.stop_keep_special_tokens
    assert p.structured_outputs.json_schema == '{"type": "object"}' and p.structured_outputs.reasoning_ended
    assert p.structured_outputs.disable_any_whitespace


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("sampling_options", "use_beam_search"), True, "sampling_options.use_beam_search"),
        (("sampling_options", "best_of"), 2, "sampling_options.best_of"),
        (("sampling_options", "n"), 2, "sampling_options.n"),
        (("sampling_options", "include_stop_str_in_output"), True, "sampling_options.include_stop_str_in_output"),
        (("output_options", "prompt_logprobs"), 1, "output_options.prompt_logprobs"),
        (("output_options", "no_stop_trim"), True, "output_options.no_stop_trim"),
        (("sampling_options", "allowed_token_ids"), [1], "sampling_options.allowed_token_ids"),  # not 1.6.1's
        (("stop_conditions", "max_thinking_tokens"), 10, "stop_conditions.max_thinking_tokens"),
        (("routing", "dp_rank"), 1, "routing.dp_rank"),
        (("multi_modal_data",), {"image_url": []}, "multi_modal_data"),
        (("bootstrap_info",), {"bootstrap_room": 1}, "bootstrap_info"),
        (("a_newer_field",), 1, "a_newer_field"),
        (("sampling_options", "a_newer_option"), 1, "sampling_options.a_newer_option"),
    ],
)
def test_a_field_not_honoured_is_refused_by_name(path, value, named):
    request = {**REQUEST, **{k: dict(v) for k, v in REQUEST.items() if isinstance(v, dict)}}
    target = request
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ServiceError) as refused:
        fields.generate_request(request, "rid", {2}, "")
    assert refused.value.reason == "UNSUPPORTED_FIELD" and refused.value.violations[0][0] == named


def test_ignore_eos_adds_no_eos_stop_and_neutral_values_are_no_request():
    request = {"token_ids": [1], "stop_conditions": {"ignore_eos": True}, "eos_token_ids": [5]}
    request |= {"extra_args": {}, "sampling_options": {"use_beam_search": False, "best_of": 1, "n": 1}}
    params = fields.generate_request(request, "r", {2}, "").sampling_params
    assert params.ignore_eos and not params.stop_token_ids


def test_stream_messages_become_dynamo_chunks():
    first = engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(index=0, token_ids=[4, 5])])
    top = common_pb2.TopLogprobs(token_ids=[6, 8], logprobs=[-0.1, -2.0])
    last = engine_pb2.GenerateResponse(finished=True, usage=common_pb2.Usage(prompt_tokens=3, completion_tokens=3))
    last.usage.total_tokens, last.usage.cached_tokens = 6, 2
    choice = last.choices.add(index=0, token_ids=[6], finish_reason=common_pb2.FINISH_REASON_STOP, stop_str="\n")
    choice.logprobs.logprobs.append(-0.1)
    choice.logprobs.top.append(top)
    assert fields.chunks(first, 3) == [{"token_ids": [4, 5], "index": 0}]
    (chunk,) = fields.chunks(last, 3)
    assert chunk["finish_reason"] == "stop" and chunk["stop_reason"] == "\n" and chunk["token_ids"] == [6]
    assert chunk["log_probs"] == [pytest.approx(-0.1)] and [e["token_id"] for e in chunk["top_logprobs"][0]] == [6, 8]
    assert chunk["completion_usage"] == {
        "prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6, "prompt_tokens_details": {"cached_tokens": 2}
    }  # fmt: skip


@pytest.mark.parametrize(
    ("reason", "stop", "expected"),
    [
        (common_pb2.FINISH_REASON_STOP, {}, "eos"),
        (common_pb2.FINISH_REASON_STOP, {"stop_token_id": 9}, "stop"),
        (common_pb2.FINISH_REASON_LENGTH, {}, "length"),
        (common_pb2.FINISH_REASON_ABORT, {}, "cancelled"),
        (common_pb2.FINISH_REASON_ERROR, {}, "error: boom"),
    ],
)
def test_finish_reasons(reason, stop, expected):
    message = engine_pb2.GenerateResponse(finished=True)
    message.error.message = "boom"
    message.choices.add(index=0, finish_reason=reason, **stop)
    assert fields.chunks(message, 1)[0]["finish_reason"] == expected


def test_zmq_hashes_are_vllms_int_by_default_and_bytes_when_asked(monkeypatch):
    h1, h2 = bytes(range(16)), bytes(range(16, 32))
    stored = kv_events.BlocksStored(hashes=[h2], parent=h1, token_ids=[1, 2], cache_salt="")
    batch = KvBatch(sequence=1, timestamp=0.0, events=[stored, kv_events.BlocksRemoved(hashes=[h1])])
    monkeypatch.delenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", raising=False)
    assert wire.int_hashes()
    stored, removed = wire.batch(batch, 2, wire.int_hashes()).events
    assert isinstance(stored, wire.BlockStored) and isinstance(removed, wire.BlockRemoved)
    assert stored.block_hashes == [int.from_bytes(h2[-8:], "big")]
    assert stored.parent_block_hash == int.from_bytes(h1[-8:], "big")  # vLLM's maybe_convert_block_hash
    assert removed.block_hashes == [int.from_bytes(h1[-8:], "big")]
    monkeypatch.setenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "0")
    stored, _ = wire.batch(batch, 2, wire.int_hashes()).events
    assert isinstance(stored, wire.BlockStored) and stored.block_hashes == [h2]


def test_a_failure_without_a_choice_still_ends_the_stream():
    message = engine_pb2.GenerateResponse(finished=True)
    message.error.message = "lost"
    assert fields.chunks(message, 1) == [{"token_ids": [], "index": 0, "finish_reason": "error: lost"}]


class Recorder:
    """Dynamo's KvEventPublisher's two calls, recorded with the threads they came from."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.threads: set[str] = set()

    def publish_stored(
        self, token_ids, num_block_tokens, block_hashes, parent_hash=None, lora_name=None, cache_salt=None
    ):
        self.threads.add(threading.current_thread().name)
        self.calls.append(("stored", token_ids, num_block_tokens, block_hashes, parent_hash, lora_name, cache_salt))

    def publish_removed(self, block_hashes):
        self.threads.add(threading.current_thread().name)
        self.calls.append(("removed", sorted(block_hashes)))


async def test_kv_relay_stores_removes_and_clears_what_it_stored():
    h1, h2, h3 = bytes(range(16)), bytes(range(16, 32)), b"\xff" * 16
    stored = kv_events_pb2.BlocksStored(
        block_hashes=[h2, h3], parent_block_hash=h1, token_ids=[1, 2, 3, 4], cache_salt="s", lora_name="sql"
    )
    events = [
        kv_events_pb2.KvEvent(
            all_blocks_cleared=kv_events_pb2.AllBlocksCleared()
        ),  # a snapshot's first: nothing stored
        kv_events_pb2.KvEvent(blocks_stored=stored),
        kv_events_pb2.KvEvent(blocks_removed=kv_events_pb2.BlocksRemoved(block_hashes=[h1, h2])),  # h1: never stored
        kv_events_pb2.KvEvent(all_blocks_cleared=kv_events_pb2.AllBlocksCleared()),
    ]
    publisher = Recorder()
    async with grpc.aio.insecure_channel("127.0.0.1:1") as channel:
        KvRelay(channel, ()).relay(kv_events_pb2.KvEventBatch(block_size=2, events=events), publisher)
    assert block_hash(h3) == -1 and block_hash(h1) == int.from_bytes(h1[-8:], "big")
    assert publisher.calls == [
        ("stored", [1, 2, 3, 4], [2, 2], [block_hash(h2), -1], block_hash(h1), "sql", "s"),
        ("removed", [block_hash(h2)]),
        ("removed", [-1]),
    ]
