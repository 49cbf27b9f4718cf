"""Is a native block-fp8 path worth it? A block-wise fp8 checkpoint's projection (DeepSeek V3 / Kimi K2 /
Qwen3-*-FP8: e4m3 weights, a scale per 128 x 128 block) three ways, at the shape's sizes and several token counts:

- bf16: the checkpoint's values dequantized (what the engine loads, fp8_load.py), torch's matmul: the reference;
- ours: what the engine serves under --quantization fp8 today: those values quantized again with a scale per row
  (fp8_linear.Fp8Linear: per-token activation scales, torch._scaled_mm), time with the activations' quantization;
- block: vLLM's way, the checkpoint's own e4m3 bytes and block scales, activations quantized per token and 128-wide
  group at run time, in a Triton block-scaled GEMM (this file's, the structure of vLLM's
  w8a8_triton_block_scaled_mm) and in cuBLAS's (torch.nn.functional.scaled_mm, BlockWise1x128 x BlockWise128x128:
  Hopper, CUDA 12.9+; "n/a" where the build lacks it); time of the GEMM alone, then with the quantization.

Errors are relative (norm of the difference / norm) against float32's product over the checkpoint's values: ours
adds a second e4m3 rounding of the weights, block does not. `w err` is ours' weight error alone.

    python -m bench.engine.block_fp8 --shape qwen3-8b --rows 1,16,256,2048,8192
    TRITON_INTERPRET=1 python -m bench.engine.block_fp8 --check   # the Triton kernel on CPU, small sizes
"""

# pyright: reportArgumentType=false, reportCallIssue=false, reportOperatorIssue=false, reportIndexIssue=false
from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl
from torch import nn
from torch.nn import functional as F

from engine_svc.model.decoder import whole
from engine_svc.model.fp8_linear import FP8, FP8_MAX, MIN_SCALE, Fp8Linear

BLOCK = 128
DEVICE = "cuda"  # "cpu" with TRITON_INTERPRET=1: a smoke run of the whole table (no timings worth reading)


def block_quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 [N, K], scales [ceil(N / 128), ceil(K / 128)] float32) as the checkpoints ship them."""
    rows, cols = weight.shape
    padded = F.pad(weight.float(), (0, -cols % BLOCK, 0, -rows % BLOCK))
    blocks = padded.unflatten(0, (-1, BLOCK)).unflatten(-1, (-1, BLOCK))
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=MIN_SCALE) / FP8_MAX
    q = (blocks / scale[:, None, :, None]).to(FP8).flatten(-2).flatten(0, 1)[:rows, :cols]
    return q.contiguous(), scale


def block_values(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    wide = scale.repeat_interleave(BLOCK, 0)[: q.shape[0]].repeat_interleave(BLOCK, 1)[:, : q.shape[1]]
    return q.float() * wide


def group_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Activations per token and 128-wide group (K a multiple of 128): (e4m3 [M, K], scales [M, K / 128] float32)."""
    groups = x.float().unflatten(-1, (-1, BLOCK))
    scale = groups.abs().amax(dim=-1).clamp(min=MIN_SCALE) / FP8_MAX
    return (groups / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(FP8).flatten(-2), scale


@triton.jit
def _block_mm(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, s_am, s_bn, s_cm, s_asm, s_bsn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """C [M, N] = sum over K tiles of (A tile . B tile^T) * a's group scale * b's block scale; BLOCK_N and BLOCK_K
    equal the quantization block, so each program's K tile has one scale per row of A and one for B."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(tl.cdiv(K, BLOCK_K)):
        k = kt * BLOCK_K + ks
        a = tl.load(a_ptr + rows[:, None] * s_am + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + cols[None, :] * s_bn + k[:, None], mask=(cols[None, :] < N) & (k[:, None] < K), other=0.0)
        a_s = tl.load(as_ptr + rows * s_asm + kt, mask=rows < M, other=0.0)
        b_s = tl.load(bs_ptr + pid_n * s_bsn + kt)
        acc += tl.dot(a, b) * a_s[:, None] * b_s
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * s_cm + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def triton_block_mm(qa, sa, qw, sw, out_dtype=torch.bfloat16) -> torch.Tensor:
    (m, k), n = qa.shape, qw.shape[0]
    out = torch.empty(m, n, dtype=out_dtype, device=qa.device)
    block_m = 16 if m <= 16 else 64
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, BLOCK))
    _block_mm[grid](qa, qw, out, sa, sw, m, n, k, qa.stride(0), qw.stride(0), out.stride(0), sa.stride(0),
                    sw.stride(0), BLOCK_M=block_m, BLOCK_N=BLOCK, BLOCK_K=BLOCK)  # fmt: skip
    return out


def cublas_weight_scales(sw: torch.Tensor) -> torch.Tensor:
    """cuBLAS's layout of 128x128 scales (torch's test_scaled_mm_block_wise_numerics): padded along K to a multiple
    of 4, transposed (K-major)."""
    return F.pad(sw, (0, -sw.shape[1] % 4)).t()


def cublas_block_mm(qa, sa, qw, sw_c) -> torch.Tensor:
    """cuBLAS's block-scaled GEMM; the activations' 1x128 scales go outer-dim-major (a small copy, timed)."""
    from torch.nn.functional import ScalingType, scaled_mm

    return scaled_mm(qa, qw.t(), sa.t().contiguous().t(), ScalingType.BlockWise1x128, sw_c,
                     ScalingType.BlockWise128x128, output_dtype=torch.bfloat16)  # fmt: skip


def cublas_problem(k: int, qw, sw_c) -> str | None:
    """Why cuBLAS's block-scaled GEMM does not run here (the build, the GPU), or None."""
    try:
        cublas_block_mm(*group_quantize(torch.ones(1, k, device=DEVICE)), qw, sw_c)
    except (RuntimeError, ValueError, NotImplementedError, ImportError, AttributeError) as error:
        return str(error).splitlines()[0][:120]
    return None


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref).norm() / ref.norm()).item()


def check() -> None:
    """The Triton kernel against the dequantized product (runs under TRITON_INTERPRET=1 on CPU)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    for m, n, k in ((3, 200, 256), (40, 256, 384)):
        qw, sw = block_quantize(torch.randn(n, k) * 0.05)
        qa, sa = group_quantize(torch.randn(m, k))
        ref = (qa.float() * sa.repeat_interleave(BLOCK, 1)) @ block_values(qw, sw).t()
        on = [t.to(device) for t in (qa, sa, qw, sw)]
        got = triton_block_mm(*on, out_dtype=torch.float32).cpu()
        print(f"check m={m} n={n} k={k}: relative error {relative_error(got, ref):.2e}")
        assert relative_error(got, ref) < 1e-5


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="qwen3-8b")
    parser.add_argument("--rows", default="1,16,256,2048,8192")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        return check()
    from bench.engine.kernels import timed
    from bench.engine.shapes import SHAPES, projection_sizes
    from engine_svc.model.fused_ops import FusedOps

    quantize = FusedOps(compile_kernels=True).quantize_rows
    group_quant = torch.compile(group_quantize)  # one fused kernel, as vLLM's per-token-group quantization
    print(f"{'matmul':<9}{'rows':>6}{'bf16 us':>9} |{'ours us':>8}{'error':>8}{'w err':>7} |{'triton mm':>10}"
          f"{'+quant':>8}{'error':>8} |{'cublas mm':>10}{'+quant':>8}{'error':>8}")  # fmt: skip
    for name, (n, k) in projection_sizes(SHAPES[args.shape]).items():
        qw, sw = block_quantize(torch.randn(n, k, device=DEVICE) / k**0.5)
        values = block_values(qw, sw)
        linear = nn.Linear(k, n, bias=False, device=DEVICE, dtype=torch.bfloat16)
        linear.weight.data.copy_(values)
        ours = Fp8Linear(linear, quantize)
        w_err = relative_error(ours.weight.float() * ours.scale.t(), values)
        sw_c = cublas_weight_scales(sw)
        if problem := cublas_problem(k, qw, sw_c):
            print(f"cuBLAS block-scaled fp8: n/a ({problem})")
        for rows in map(int, args.rows.split(",")):
            x = torch.randn(rows, k, device=DEVICE, dtype=torch.bfloat16)
            ref = x.float() @ values.t()
            bf16 = timed(lambda: linear(x))
            ours_us, ours_err = timed(lambda: whole(ours(x))), relative_error(whole(ours(x)), ref)
            qa, sa = group_quantize(x)
            tri = timed(lambda: triton_block_mm(qa, sa, qw, sw))
            tri_q = timed(lambda: triton_block_mm(*group_quant(x), qw, sw))
            tri_err = relative_error(triton_block_mm(qa, sa, qw, sw), ref)
            line = (f"{name:<9}{rows:>6}{bf16:>9.1f} |{ours_us:>8.1f}{ours_err:>8.4f}{w_err:>7.4f} |{tri:>10.1f}"
                    f"{tri_q:>8.1f}{tri_err:>8.4f} |")  # fmt: skip
            if not problem:
                try:  # cuBLAS's shape rules for block scaling are its own: a refused size says so and goes on
                    cub = timed(lambda: cublas_block_mm(qa, sa, qw, sw_c))
                    cub_q = timed(lambda: cublas_block_mm(*group_quant(x), qw, sw_c))
                    cub_err = relative_error(cublas_block_mm(qa, sa, qw, sw_c), ref)
                    line += f"{cub:>10.1f}{cub_q:>8.1f}{cub_err:>8.4f}"
                except RuntimeError as error:
                    line += f" n/a ({str(error).splitlines()[0][:60]})"
            print(line, flush=True)


if __name__ == "__main__":
    main()
