"""The paged Triton decode kernel against the SDPA backend. CUDA only (Triton's CPU interpreter cannot run it):
`python -m pytest tests/engine/test_triton_attention.py` on the GPU machine."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("the Triton kernel needs CUDA", allow_module_level=True)
triton_attention = pytest.importorskip("engine_svc.triton_attention")

from engine_svc.attention import AttentionMetadata, SdpaBackend  # noqa: E402


@pytest.mark.parametrize("heads,kv_heads,dim", [(8, 2, 64), (4, 4, 16), (32, 8, 128)])
def test_paged_decode_matches_sdpa(heads, kv_heads, dim):
    torch.manual_seed(0)
    device = "cuda"
    block_size, num_blocks, width = 16, 40, 9
    lengths = [1, 15, 16, 17, 70, 144]  # inside one block, block edges, several tiles, a full table
    cache = torch.randn(num_blocks * block_size, 2, kv_heads, dim, device=device, dtype=torch.bfloat16)
    # Each sequence owns distinct, shuffled blocks; unused table entries point at block 0.
    order = torch.randperm(num_blocks - 1) + 1
    tables = torch.zeros(len(lengths), width, dtype=torch.int64)
    used = 0
    for row, length in enumerate(lengths):
        count = -(-length // block_size)
        tables[row, :count] = order[used:used + count]
        used += count
    meta = AttentionMetadata(slot_mapping=torch.zeros(0, dtype=torch.int64, device=device), block_size=block_size,
                             num_decodes=len(lengths), decode_block_tables=tables.to(device),
                             decode_context_lens=torch.tensor(lengths, device=device))
    q = torch.randn(len(lengths), heads, dim, device=device, dtype=torch.bfloat16)
    sdpa = SdpaBackend(heads, kv_heads, dim)
    sdpa.prepare(meta)
    expected = sdpa._decode(q, cache, meta)
    got = triton_attention.TritonBackend(heads, kv_heads, dim)._decode(q, cache, meta)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
