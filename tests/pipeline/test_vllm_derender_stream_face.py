"""vLLM 0.33's per-chunk derender face without a stack (pipeline_svc/faces/vllm_derender_stream.py): its tables
hold every field of vLLM's request, chunk and stream-state models, the state it writes is one vLLM's model reads
back, and random states are refused typed, never another exception. The live route:
tests/gateway/test_vllm_scale_out.py."""

from __future__ import annotations

import contextlib
import random

import pytest

from pipeline_svc.faces.vllm_derender_stream import CHAT, CHUNK, COMPLETION, STATE, StreamState
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
