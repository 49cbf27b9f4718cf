"""The Triton attention kernels reading the sliding-window layers' own pool (scheduling/window_pool.py), whose
tables hold 0 where blocks left the window: the windowed families through the real scheduler, a runner on the
kernels (on CUDA with decode graphs, a multi-step decode loop and piecewise mixed-step graphs) against the eager
SDPA runner with one pool (every layer in the full tables). On CUDA (`python -m pytest
tests/engine/test_triton_window_pool.py` on the GPU machine) or through Triton's interpreter (`TRITON_INTERPRET=1`,
float32, eager); skipped otherwise."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("the Triton kernels need CUDA (or TRITON_INTERPRET=1)", allow_module_level=True)
pytest.importorskip("triton")

from engine_svc.model.attention import make_backend
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.scheduler import Scheduler
from engine_svc.scheduling.sequence import Sequence
from engine_svc.scheduling.window_pool import WindowedBlockPool
from tests.engine.families import WINDOW, tiny

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32  # the interpreter mishandles bf16
TOLERANCE = 5e-2 if DEVICE == "cuda" else 1e-3  # bf16: as test_triton_windowed_families.py
# gpt-oss in float32 on CUDA too: in bf16 the kernels' rounding (not the pool: one pool gives the same 0.42) flips a
# token's expert choice against SDPA's, which moves its logits far past any tolerance (H100, 25th session).
FLOAT32 = {"gpt_oss"}
BLOCK, BLOCKS, WINDOW_BLOCKS, LOOP = 4, 48, 16, 6


def _runner(model, windowed: bool) -> ModelRunner:
    graphs = DEVICE == "cuda" and windowed
    runner = ModelRunner(
        model, block_size=BLOCK, num_blocks=0, max_num_seqs=4, max_model_len=128, cuda_graphs=graphs,
        attention="triton" if graphs else "sdpa", mixed_step_graphs_up_to=64 if graphs else 0,
    )  # fmt: skip
    if windowed and not graphs:  # the interpreter: the attention kernels only
        layer, kind = runner.model.layer0, runner.model.family
        shape = (layer.num_heads, layer.num_kv_heads, layer.head_dim, kind.attention_scale, kind.attention_softcap)
        runner.backend = make_backend("triton", *shape)
    runner.allocate_kv(BLOCKS, WINDOW_BLOCKS if windowed else 0)
    return runner


@pytest.mark.parametrize("family", ["gemma3", "gpt_oss", "mistral"])
def test_kernels_on_freed_window_blocks_equal_one_pool(family):
    model = tiny(family).to(DEVICE, torch.float32 if family in FLOAT32 else DTYPE)
    reference, kernels = _runner(model, False), _runner(model, True)
    assert kernels.window_group == WINDOW and not reference.window_group
    pool = WindowedBlockPool(BLOCKS, BLOCK, WINDOW, WINDOW_BLOCKS, caching=True)
    scheduler = Scheduler(pool, 4, 12)
    g = torch.Generator().manual_seed(0)
    for i, n in enumerate((30, 21, 17)):
        scheduler.add(Sequence(str(i), 0, torch.randint(3, 200, (n,), generator=g).tolist(), SamplingConfig()))
    steps = 0
    with torch.inference_mode():
        while scheduler.num_waiting or any(s.remaining > 1 for s in scheduler.running) or steps < 3:
            chunks = scheduler.schedule()  # chunked prefills beside decodes, then decode-only steps
            expected, got = (r.execute(chunks).float() for r in (reference, kernels))
            torch.testing.assert_close(got, expected, atol=TOLERANCE, rtol=TOLERANCE)
            for c in chunks:
                scheduler.computed(c.seq, c.num_tokens)
            for row, chunk in enumerate(c for c in chunks if c.samples):
                chunk.seq.append(int(expected[row].argmax()))
            steps += all(c.num_tokens == 1 for c in chunks)
        # A decode loop of LOOP steps on the device: positions, slots (both pools') advance without the host.
        seqs = list(scheduler.running)
        assert scheduler.reserve(seqs, LOOP)
        chunks = scheduler.schedule()
        loops = [r.decode_loop(chunks) for r in (reference, kernels)]
        tokens = None
        for _ in range(LOOP):  # both fed the reference's greedy tokens (a copy: its next step overwrites them)
            (expected, greedy), (got, _) = loops[0](tokens), loops[1](tokens)
            torch.testing.assert_close(got.float(), expected.float(), atol=TOLERANCE, rtol=TOLERANCE)
            tokens = greedy.clone()
    assert any(0 in s.window_block_ids for s in seqs)  # the kernels read tables with freed blocks
    if DEVICE == "cuda":
        assert kernels.graphs and kernels.pieces is not None and kernels.pieces.graphs
