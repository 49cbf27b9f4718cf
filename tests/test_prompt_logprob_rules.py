"""scaleout_common/prompt_logprob_rules.py: the size floors against the real encodings (the engine's PromptInfo, the
vLLM generate face's JSON), the up-front refusals naming the field and the limit (render's resolve, the engine's
floor), and the face's `.npy` scores as vLLM's numpy2base64 prints them."""

from __future__ import annotations

import base64
import io
import json
import math
import random

import pytest

from pipeline_svc.faces.vllm_generate_output import npy_base64, prompt_logprobs
from scaleout.v1 import common_pb2, engine_pb2, render_pb2
from scaleout_common import prompt_logprob_rules, sampling_rules
from scaleout_common.errors import ServiceError

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
    rows = whole_vocabulary_rows(3, top)
    proto = engine_pb2.PromptInfo(num_tokens=3, logprobs=rows).ByteSize()
    floor = prompt_logprob_rules.answer_bytes(3, top, json=False)
    assert floor <= proto and (top < VOCAB or proto <= floor * 1.01)  # exact for the whole vocabulary's ids
    prompt = [7, *(rows.top[i].token_ids[0] for i in range(2))]
    as_json = len(json.dumps(prompt_logprobs(prompt, rows)))  # the face prints these as vLLM does
    floor = prompt_logprob_rules.answer_bytes(3, top, json=True)
    assert floor <= as_json and (top < VOCAB or as_json <= floor * 1.1)


def test_render_refuses_what_its_json_answer_cannot_carry():
    """The whole vocabulary over 300 prompt tokens is ~1.1 GB of JSON: a 400 at once, naming the field and the
    limit, where it was computed for minutes and then dropped by gRPC (a 429)."""
    limits = sampling_rules.ModelLimits(max_model_len=8192, vocab_size=VOCAB, max_logprobs=VOCAB)
    request = render_pb2.RenderCompletionRequest(prompt_logprobs=-1)
    sampling_rules.resolve(request, 18, limits, chat=False, prompt_field="prompt")  # 17 rows fit 64 MB
    with pytest.raises(ServiceError) as refused:
        sampling_rules.resolve(request, 300, limits, chat=False, prompt_field="prompt")
    error = refused.value
    assert error.reason == "INVALID_SAMPLING_PARAM" and error.violations[0][0] == "prompt_logprobs"
    assert "1087 MB" in error.message and "64 MB message limit (--max-message-mb)" in error.message
    assert "at most 18 prompt tokens" in error.message


def test_an_answer_made_too_large_gets_the_same_refusal():
    prompt_logprob_rules.check_answer_made(100, 100, 5, "prompt_logprobs")
    prompt_logprob_rules.check_answer_made(101, 100, None, "prompt_logprobs")  # not prompt logprobs': gRPC's own
    with pytest.raises(ServiceError) as refused:
        prompt_logprob_rules.check_answer_made(101, 100, 5, "sampling_params.prompt_logprobs")
    assert refused.value.violations[0][0] == "sampling_params.prompt_logprobs"


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
