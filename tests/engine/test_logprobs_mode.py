"""What logprobs carry: vLLM's four logprobs modes in the sampler, and a float32 vocabulary head on a bfloat16 model
(logprobs equal to a float32 head's over the same hidden state, not to the model-dtype head's)."""

from __future__ import annotations

import pytest
import torch

from engine_svc.model.sampler import LOGPROBS_MODES, Sampler
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Sequence
from scaleout.v1 import engine_pb2
from tests.engine.conftest import engine_stub, generate, request, tiny_llama

VOCAB = 64
BIAS = {7: 3.0}
ROWS = [  # a sampling row cut by top-k, a greedy row with a logit bias, a sampling row with a bias, no logprobs
    SamplingConfig(temperature=0.5, top_k=5, seed=1, logprobs=3),
    SamplingConfig(temperature=0.0, logit_bias=BIAS, logprobs=3),
    SamplingConfig(temperature=2.0, seed=2, logit_bias=BIAS, logprobs=2),
    SamplingConfig(temperature=0.0),
]


def _sample(mode: str, logits: torch.Tensor):
    seqs = [Sequence(f"r{i}", 0, [5, 6], config) for i, config in enumerate(ROWS)]
    return Sampler(VOCAB, torch.device("cpu"), mode).sample(logits.clone(), seqs)


def _processed(logits: torch.Tensor) -> torch.Tensor:
    """vLLM's processed scores of each row: processors, then (sampling rows) temperature and top-k."""
    out = logits.clone()
    out[1, 7] += 3.0
    out[2, 7] += 3.0
    out[0] /= 0.5
    out[0][out[0] < out[0].topk(5).values[-1]] = float("-inf")
    out[2] /= 2.0
    return out


def test_each_mode_is_vllms():
    torch.manual_seed(0)
    logits = torch.randn(len(ROWS), VOCAB) * 3
    runs = {mode: _sample(mode, logits) for mode in LOGPROBS_MODES}
    tokens = runs["raw_logprobs"][0]
    assert all(run[0] == tokens for run in runs.values())  # the mode changes what is reported, never the draw
    expected = {
        "raw_logits": logits,
        "raw_logprobs": logits.log_softmax(-1),
        "processed_logits": _processed(logits),
        "processed_logprobs": _processed(logits).log_softmax(-1),
    }
    for mode, (_, rows) in runs.items():
        assert rows[3] is None
        for row, token in enumerate(tokens[:3]):
            values = expected[mode][row]
            got = rows[row]
            assert got.logprob == pytest.approx(values[token].item(), abs=1e-5), (mode, row)
            assert got.top_ids == values.topk(len(got.top_ids)).indices.tolist(), (mode, row)
            assert got.rank == int((values > values[token]).sum()) + 1
    raw, processed = runs["raw_logprobs"][1], runs["processed_logprobs"][1]
    for row in range(3):  # temperature, top-k and the bias all move a token's logprob
        assert abs(raw[row].logprob - processed[row].logprob) > 1e-3, row
    # the top-k cut leaves the sampling row's 5 kept tokens a whole distribution
    kept = _processed(logits)[0].log_softmax(-1)
    assert kept.exp().sum().item() == pytest.approx(1.0) and int(torch.isfinite(kept).sum()) == 5


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="raw_logprobs"):
        Sampler(VOCAB, torch.device("cpu"), "final_logprobs")


PROMPT = [1, 17, 42, 99, 7, 200, 31, 64]


async def test_a_float32_head_on_a_bfloat16_model_gives_a_float32_heads_logits():
    """raw_logits of the prompt (prompt_logprobs) and of the first sampled token, against the head computed both
    ways over the bfloat16 model's own last hidden state: equal to the float32 head's, off the bfloat16 head's."""
    model = tiny_llama().to(torch.bfloat16)
    with torch.no_grad():
        hidden = model.model(torch.tensor([PROMPT])).last_hidden_state[0]
        as_float32 = torch.nn.functional.linear(hidden.float(), model.lm_head.weight.float())
        as_model = model.lm_head(hidden).float()
    flags = ("--head-dtype", "float32", "--logprobs-mode", "raw_logits")
    async with engine_stub(model, *flags) as (stub, _):
        info = await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())
        assert (info.dtype, info.head_dtype, info.logprobs_mode) == ("bfloat16", "float32", "raw_logits")
        messages, tokens = await generate(
            stub, request(PROMPT, max_tokens=1, temperature=0, logprobs=0, prompt_logprobs=0)
        )
    [prompt] = [m.prompt.logprobs.logprobs for m in messages if m.HasField("prompt")]
    [first] = [c.logprobs.logprobs[0] for m in messages for c in m.choices if c.logprobs.logprobs]
    got = torch.tensor([*prompt, first])
    targets = torch.tensor([*PROMPT[1:], tokens[0][0]])
    rows = torch.arange(len(PROMPT))
    assert (got - as_float32[rows, targets]).abs().max() < 1e-4
    assert (got - as_model[rows, targets]).abs().max() > 1e-3
