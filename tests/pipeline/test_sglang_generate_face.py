"""SGLang's `/generate` face (pipeline_svc/faces/sglang_generate.py) over loopback fakes (tests/pipeline/fakes.py,
whose hops carry at most 4 MB a message): a unary answer larger than one message goes in pieces, and a hop's
message too large for the prompt logprobs asked is the 400 naming `top_logprobs_num`, as on the OpenAI routes
(a 429, "retry later", before)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import grpc
import pytest

from pipeline_svc.answer_pieces import PIECE_BYTES
from pipeline_svc.faces.sglang_generate import SGLangGenerate
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason
from tests.pipeline.fakes import FINISHED, HANG, OUTPUT, Context, Derender, Engine, body, ended, hops_over

ONE = (OUTPUT, HANG)  # nothing more written to derender once its answer failed (no write race: hops.py)
SCORED = {"input_ids": [1, 2, 3], "return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": 5}


@dataclass
class WideDerender(Derender):
    """Each chunk's text `size` characters long."""

    size: int = 0

    async def DerenderStream(self, request_iterator, context):
        async for answer in super().DerenderStream(request_iterator, context):
            for choice in answer.completion.choices:
                choice.text = "x" * self.size if choice.text else ""
            yield answer


async def _generate(payload: dict, derender: Derender, script=(OUTPUT, OUTPUT, FINISHED)) -> list:
    engine = Engine(list(script))
    async with hops_over(engine, derender) as hops:
        try:
            return [piece async for piece in SGLangGenerate(hops)(body(payload), Context())]
        finally:
            await ended(engine, derender)


async def test_a_unary_answer_larger_than_a_message_goes_in_pieces():
    out = await _generate({"input_ids": [1, 2, 3]}, WideDerender(size=3 << 20))  # 9 MiB of text, 3 MiB a hop
    assert len(out) == 3 and all(len(piece.data) <= PIECE_BYTES for piece in out)
    answer = json.loads(b"".join(piece.data for piece in out))
    assert len(answer["text"]) == 9 << 20


async def test_a_streamed_event_larger_than_a_message_goes_in_pieces():
    """SGLang's events are cumulative: 3, 6, then 9 MiB of text; the SSE bytes are the same once joined."""
    out = await _generate({"input_ids": [1, 2, 3], "stream": True}, WideDerender(size=3 << 20))
    assert all(len(piece.data) <= PIECE_BYTES for piece in out)
    events = b"".join(piece.data for piece in out).decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    texts = [json.loads(event.removeprefix("data: "))["text"] for event in events[:-2]]
    assert [len(text) for text in texts] == [3 << 20, 6 << 20, 9 << 20]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_hops_message_too_large_for_prompt_logprobs_is_a_400_naming_top_logprobs_num(stream):
    with pytest.raises(ServiceError) as refused:
        await _generate({**SCORED, "stream": stream}, WideDerender(size=5 << 20), ONE)
    error = refused.value
    assert error.reason == Reason.INVALID_SAMPLING_PARAM and error.violations[0][0] == "top_logprobs_num"
    assert "top_logprobs_num (5)" in error.message


async def test_without_prompt_logprobs_the_hops_status_stays():
    with pytest.raises(ServiceError) as refused:
        await _generate({"input_ids": [1, 2, 3]}, WideDerender(size=5 << 20), ONE)
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
