"""scaleout_common/prompt_logprob_rules.py: the size floors against the real encodings (the engine's PromptInfo,
derender's PromptPositionLogprobs, vLLM's JSON), the up-front refusals naming the field and the limit (render's
resolve), a hop's RESOURCE_EXHAUSTED as the same refusal, pipeline_svc/answer_pieces.py, and the generate face's
`.npy` scores as vLLM's numpy2base64 prints them."""

from __future__ import annotations

import base64
import io
import json
import math
import random

import grpc
import pytest
from google.api import httpbody_pb2

from pipeline_svc.answer_pieces import PIECE_BYTES, pieces
from pipeline_svc.faces.vllm_generate_output import npy_base64, prompt_logprobs
from scaleout.v1 import common_pb2, derender_pb2, engine_pb2, render_pb2
from scaleout_common import prompt_logprob_rules, sampling_rules
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason

VOCAB = 49152  # the default model's (SmolLM2)


def whole_vocabulary_rows(prompt_len: int, top: int) -> common_pb2.TokenLogprobs:
    """Prompt logprobs as the engine sends them: each row's `top` alternatives, most likely first."""
    rng = random.Random(0)
    rows = common_pb2.TokenLogprobs()
    for _ in range(prompt_len - 1):
        ids = rng.sample(range(VOCAB), top)
        values = sorted((math.log(rng.random()) * 8 for _ in ids), reverse=True)  # float32 in the message
        rows.logprobs.append(values[0])
        rows.ranks.append(1)
        rows.top.add(token_ids=ids, logprobs=values)
    return rows


@pytest.mark.parametrize("top", [20, 4096, VOCAB])
def test_the_floors_are_under_the_real_encodings_and_near_them(top):
    """Each form's count against the message or text it stands for (exact for the whole vocabulary's ids)."""
    rows = whole_vocabulary_rows(3, top)
    whole = top == VOCAB
    engine = engine_pb2.PromptInfo(num_tokens=3, logprobs=rows).ByteSize()
    floor = prompt_logprob_rules.answer_bytes(3, top, prompt_logprob_rules.ENGINE)
    assert floor <= engine and (not whole or engine <= floor * 1.01)
    derender = sum(
        derender_pb2.PromptPositionLogprobs(
            token_ids=row.token_ids, logprobs=row.logprobs, ranks=range(1, top + 1), decoded_tokens=["ab"] * top
        ).ByteSize()
        for row in rows.top
    )
    floor = prompt_logprob_rules.answer_bytes(3, top, prompt_logprob_rules.DERENDER)
    assert floor <= derender and (not whole or derender <= floor * 1.1)
    prompt = [7, *(rows.top[i].token_ids[0] for i in range(2))]
    as_json = len(json.dumps(prompt_logprobs(prompt, rows)))  # the face prints these as vLLM does
    floor = prompt_logprob_rules.answer_bytes(3, top, prompt_logprob_rules.JSON)
    assert floor <= as_json and (not whole or as_json <= floor * 1.1)


def test_render_refuses_what_derender_cannot_carry():
    """The whole vocabulary over 300 prompt tokens: a 400 at once, naming the field and the limit, where it was
    computed for minutes and then dropped by gRPC (a 429). Derender's answer carries 110 rows of it in 64 MB; a
    stream's one JSON event 17."""
    limits = sampling_rules.ModelLimits(max_model_len=8192, vocab_size=VOCAB, max_logprobs=VOCAB)
    unary = render_pb2.RenderCompletionRequest(prompt_logprobs=-1)
    sampling_rules.resolve(unary, 111, limits, chat=False, prompt_field="prompt")
    with pytest.raises(ServiceError) as refused:
        sampling_rules.resolve(unary, 300, limits, chat=False, prompt_field="prompt")
    error = refused.value
    assert error.reason == "INVALID_SAMPLING_PARAM" and error.violations[0][0] == "prompt_logprobs"
    assert "173 MB in one message" in error.message and "64 MB limit (--max-message-mb)" in error.message
    assert "at most 111 prompt tokens" in error.message
    streamed = render_pb2.RenderCompletionRequest(prompt_logprobs=-1, stream=True)
    sampling_rules.resolve(streamed, 18, limits, chat=False, prompt_field="prompt")
    with pytest.raises(ServiceError, match="at most 18 prompt tokens"):
        sampling_rules.resolve(streamed, 19, limits, chat=False, prompt_field="prompt")


def test_a_hops_message_limit_becomes_the_same_refusal():
    """Rows the count let through that a hop could not carry: gRPC's RESOURCE_EXHAUSTED (a 429) becomes the 400."""
    dropped = ServiceError(
        grpc.StatusCode.RESOURCE_EXHAUSTED, Reason.UPSTREAM_ERROR, "Sent message larger than max (71 vs. 67)"
    )
    error = prompt_logprob_rules.oversized(dropped, 49152, "prompt_logprobs")
    assert error.reason == "INVALID_SAMPLING_PARAM" and error.violations[0][0] == "prompt_logprobs"
    assert prompt_logprob_rules.oversized(dropped, None, "prompt_logprobs") is dropped  # not prompt logprobs'
    full = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, Reason.QUEUE_FULL, "the engine's waiting queue is full")
    assert prompt_logprob_rules.oversized(full, 5, "prompt_logprobs") is full


def test_scores_are_vllms_npy():
    """vLLM's numpy2base64: np.save's bytes (allow_pickle=False) in base64 (its module imports for ~10 s)."""
    np = pytest.importorskip("numpy")

    def numpy2base64(values) -> str:
        with io.BytesIO() as buffer:
            np.save(buffer, values, allow_pickle=False)
            return base64.b64encode(buffer.getbuffer()).decode("ascii")

    scores = [[-1.5, -0.25], [-3.0], [-math.inf, -7.125]]
    expected = np.array([[-1.5, -0.25], [-3.0, -np.inf], [-np.inf, -7.125]], dtype=np.float32)
    assert npy_base64(scores, 2) == numpy2base64(expected)
    assert npy_base64([[0.5] * 3] * 70, 3) == numpy2base64(np.full((70, 3), 0.5, dtype=np.float32))


def test_an_answer_larger_than_a_message_goes_in_pieces():
    answer = httpbody_pb2.HttpBody(content_type="application/json", data=b"x" * (2 * PIECE_BYTES + 5))
    sent = list(pieces(answer))
    assert [len(p.data) for p in sent] == [PIECE_BYTES, PIECE_BYTES, 5] and b"".join(
        p.data for p in sent
    ) == answer.data
    assert {p.content_type for p in sent} == {"application/json"}
    small = httpbody_pb2.HttpBody(content_type="application/json", data=b"{}")
    assert list(pieces(small)) == [small]
