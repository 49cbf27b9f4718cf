"""Every fast-path family against transformers' forward, on tiny random-weight models (families.py): logits of
chunked prefills, decodes, prefix-cache hits in a mixed step and prompts longer than the sliding window, then
greedy tokens through the real engine server, which must serve each family on the paged backend."""

from __future__ import annotations

import asyncio

import pytest
import torch

from engine_svc.model.moe import Routing, route
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence
from scaleout.v1 import engine_pb2
from tests.engine.conftest import engine_stub, generate, request
from tests.engine.families import FAMILIES, WINDOW, greedy, logits_of, tiny

BLOCK = 4
PROMPT = [1] + [(7 * j) % 200 + 3 for j in range(29)]  # 30 tokens: over 3 sliding windows
SHARED = 20  # tokens (5 full blocks) a second prompt shares with PROMPT: its prefix-cache hit
# fp8's bound on the logits' error, as a share of their largest (0.15 unless named). GLM-4.5's tiny model has more
# fp8 projections ahead of its last layer (a dense MLP's and the attention's); each alone moves the logits by 3-7%
# as in the other families, together by 19% (the same with the exact run's routing replayed: no expert flip).
FP8_BOUND = {"glm4_moe": 0.25}
FP8 = torch.float8_e4m3fn
# Served through the engine server: every family but Moonlight's (deepseek_v3_q), whose one q_proj is all that sets
# it apart from deepseek_v3 and comes before the cache, which the logits tests cover (a server costs ~3 s).
SERVED = sorted(set(FAMILIES) - {"deepseek_v3_q"})


def _sequence(name: str, tokens: list[int], blocks: list[int]) -> Sequence:
    seq = Sequence(name, 0, list(tokens), SamplingConfig())
    seq.block_ids = blocks
    return seq


def _close(got: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(got, expected, atol=2e-4, rtol=2e-4)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_logits_match_transformers(family):
    model = tiny(family)
    runner = ModelRunner(model, block_size=BLOCK, num_blocks=40, max_num_seqs=4, max_model_len=128, cuda_graphs=False)
    first = _sequence("a", PROMPT, list(range(1, 13)))  # 48 tokens of room
    with torch.inference_mode():
        # A chunked prefill: 12 + 12 + 6 tokens, the last chunk samples.
        assert runner.execute([Chunk(first, 0, 12)]).shape[0] == 0
        runner.execute([Chunk(first, 12, 12)])
        rows = [runner.execute([Chunk(first, 24, 6)])[0]]
        for _ in range(3):  # decodes
            first.append(int(rows[-1].argmax()))
            rows.append(runner.execute([Chunk(first, first.num_tokens - 1, 1)])[0])
        # A prefix-cache hit in a mixed step: the second prompt's first 5 blocks are the first's, its chunk
        # continues from them beside the first sequence's decode.
        first.append(int(rows[-1].argmax()))
        second = _sequence("b", PROMPT[:SHARED] + [9, 8, 7, 6, 5, 4, 3], first.block_ids[:5] + [20, 21, 22])
        mixed = runner.execute([Chunk(first, first.num_tokens - 1, 1), Chunk(second, SHARED, 7)])
    rows.append(mixed[0])
    expected = logits_of(model, first.prompt_ids + first.output_ids)[len(PROMPT) - 1 :]
    _close(torch.stack(rows), expected)
    _close(mixed[1], logits_of(model, second.prompt_ids)[-1])
    assert (WINDOW in runner.model.family.windows) == (family in ("gemma2", "gemma3", "gpt_oss", "mistral"))


@pytest.mark.parametrize("family", SERVED)
async def test_served_on_the_paged_backend_with_transformers_greedy_tokens(family):
    model = tiny(family)
    prompts = [PROMPT, PROMPT[:SHARED] + [11, 12, 13], [1, 5, 9]]
    # In process (a thread): the model is built here, and CUDA's default child core would need a picklable builder.
    flags = ("--block-size", str(BLOCK), "--max-num-batched-tokens", "16", "--engine-core", "thread")
    async with engine_stub(model, *flags) as (stub, _):
        info = await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())
        first = await generate(stub, request(prompts[0], temperature=0, max_tokens=8, ignore_eos=True))
        rest = await asyncio.gather(
            *[generate(stub, request(p, temperature=0, max_tokens=8, ignore_eos=True)) for p in prompts[1:]]
        )
    assert info.backend == "paged"
    results = [first, *rest]
    assert results[1][0][0].prompt.cached_tokens == SHARED  # the first prompt's blocks, found again
    for prompt, (_, tokens) in zip(prompts, results):
        assert tokens[0] == greedy(model, prompt, 8)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fp8_weights_and_cache_stay_near_the_logits(family):
    """--quantization fp8 and --kv-cache-dtype fp8 (CPU converts e4m3 in torch): each family runs them, its
    logits within e4m3's rounding of transformers' (the experts of a mixture and GeGLU's gate_up are e4m3 too)."""
    model = tiny(family)
    runner = ModelRunner(
        model, block_size=BLOCK, num_blocks=16, max_num_seqs=1, max_model_len=64, cuda_graphs=False,
        quantization="fp8", kv_cache_dtype="fp8",
    )  # fmt: skip
    for layer in runner.model.layers:  # every MLP in e4m3: SwiGLU's and GeGLU's gate_up, a mixture's experts
        mlp = layer.gate_up.linear
        assert {w.dtype for w in ((mlp.gate_up, mlp.down) if layer.mlp_kind == "moe" else (mlp.weight,))} == {FP8}
        if layer.mla is not None:  # and MLA's q_b_proj and kv_b_proj
            assert {p.linear.weight.dtype for p in (layer.mla.q_b, layer.mla.kv_b) if p is not None} == {FP8}
    seq = _sequence("a", PROMPT, list(range(1, 9)))
    with torch.inference_mode():
        runner.execute([Chunk(seq, 0, 12)])
        got = runner.execute([Chunk(seq, 12, 18)])[0]
    expected = logits_of(model, PROMPT)[-1]
    assert (got - expected).abs().max() < FP8_BOUND.get(family, 0.15) * expected.abs().max()


def test_grouped_routing_keeps_each_token_to_its_best_groups():
    """GLM-4.5's routing on its tiny model's router: each token's experts lie in its top_groups groups, and for
    most tokens that is not the best experts overall (so the equivalence tests above see groups excluded)."""
    model = tiny("glm4_moe")
    gate, routing = model.model.layers[1].mlp.gate, Routing.of(model.config)
    x = torch.randn(64, model.config.hidden_size)
    _, ids = route(x, gate.weight, routing, None, gate.e_score_correction_bias)
    per_group = gate.weight.shape[0] // routing.groups
    assert all(len(set(row)) <= routing.top_groups for row in (ids // per_group).tolist())
    ungrouped = Routing(routing.rule, routing.top_k, routing.renormalize, scale=routing.scale)
    _, anywhere = route(x, gate.weight, ungrouped, None, gate.e_score_correction_bias)
    assert (ids.sort(-1)[0] != anywhere.sort(-1)[0]).any(-1).float().mean() > 0.5
