"""vLLM 0.33's per-chunk derender face without a stack (pipeline_svc/faces/vllm_derender_stream.py): its tables
hold every field of vLLM's request, chunk and stream-state models, the state it writes is one vLLM's model reads
back, a tool call keeps its first id and ends the choice as tool_calls (the tiny model of the live test calls no
tool), and random states are refused typed, never another exception. The live route:
tests/gateway/test_vllm_scale_out.py."""

from __future__ import annotations

import contextlib
import random

import pytest

from pipeline_svc.faces.vllm_derender_stream import CHAT, CHUNK, COMPLETION, STATE, StreamState, VllmDerenderStream
from scaleout_common.errors import ServiceError

LOGPROB_CONTEXT = "stream_state.logprob_context_token_ids"
protocol = pytest.importorskip(
    "vllm.entrypoints.scale_out.token_in_token_out.protocol", reason="vLLM 0.33's wheel (make setup installs it)"
)


def test_the_tables_cover_vllms_fields():
    assert set(CHAT) == set(protocol.DerenderChatStreamRequest.model_fields)
    assert set(COMPLETION) == set(protocol.DerenderCompletionStreamRequest.model_fields)
    assert set(CHUNK) == set(protocol.GenerateTokensStreamResponse.model_fields)
    assert set(STATE) == set(protocol.DerenderStreamState.model_fields)


def test_the_state_written_is_vllms_and_reads_back():
    state = StreamState(True, 7, [5, 6, 7, 8, 9], [2, 3], True, ["call_a"])
    dumped = protocol.DerenderStreamState.model_validate(state.json()).model_dump(mode="json")
    assert dumped == state.json() and StreamState.read(dumped) == state
    assert StreamState.read(protocol.DerenderStreamState().model_dump(mode="json")) == StreamState()


@pytest.mark.parametrize(
    "state, field",
    [
        ({"prev_tokens": ["a"]}, "stream_state.prev_tokens"),
        ({"read_offset": 2}, "stream_state.read_offset"),
        ({"output_token_ids": [1], "output_chunk_lens": [0, 1]}, "stream_state.output_chunk_lens"),
        ({"output_token_ids": [1, 2], "output_chunk_lens": [2], "logprob_context_token_ids": [2]}, LOGPROB_CONTEXT),
        ({"output_token_ids": [-1], "output_chunk_lens": [1]}, "stream_state.output_token_ids"),
        ({"bogus": 1}, "stream_state.bogus"),
    ],
)
def test_refusals_name_the_field(state, field):
    with pytest.raises(ServiceError) as refused:
        StreamState.read(state)
    assert refused.value.violations[0][0] == field


def test_random_states_are_refused_typed_or_read():
    rng = random.Random(11)
    values = [None, True, 0, -1, 2**40, 1.5, "", "x", [], [1, "a"], [0], {}, [[1]], ["a"] * 3]
    for _ in range(3000):
        state = StreamState(True, 3, [5, 6, 7], [1, 2], False, ["c"]).json()
        state[rng.choice([*state, "bogus"])] = rng.choice(values)
        with contextlib.suppress(ServiceError):
            StreamState.read(state)


def test_tool_calls_keep_their_first_id_and_finish_as_tool_calls():
    state = StreamState(role_sent=True, last_tool_call_ids=["call_first"])
    calls = [{"index": 0, "id": "call_replayed", "type": "function", "function": {"name": "f", "arguments": ""}}]
    calls.append({"index": 1, "id": "call_new", "type": "function", "function": {"name": "g", "arguments": ""}})
    choice = {"index": 0, "delta": {"role": "assistant", "tool_calls": calls}, "finish_reason": "stop"}
    out = VllmDerenderStream._chat_choice(choice | {"stop_reason": None}, state)
    assert [c["id"] for c in out["delta"]["tool_calls"]] == state.last_tool_call_ids == ["call_first", "call_new"]
    assert out["finish_reason"] == "tool_calls" and state.tools_streamed and "role" not in out["delta"]
    later = VllmDerenderStream._chat_choice({"index": 0, "delta": {}, "finish_reason": "stop"}, StreamState())
    assert later["delta"] == {"role": "assistant"} and later["finish_reason"] == "stop"
