"""What the hardware allows for a workload: weight + KV bytes per decode step against the measured copy
bandwidth, prefill FLOPs against the measured matmul rate.

For C closed-loop streams with mean uncached prompt I_new (on top of I_cached cached tokens) and O output
tokens, one round of the loop (every stream finishing one request) needs O decode steps of the whole batch
and C prefills, so

    output tok/s  <=  C * O / (O * t_step(C) + C * t_prefill)
    t_step(C)     =   max((weights + C * ctx * kv_bytes_per_token) / bandwidth, 2 * C * matmul_params / rate)
    t_prefill     =   (2 * matmul_params * I_new + 4 * layers * q_dim * I_new * (I_cached + I_new / 2)) / rate

with ctx the mean context of a decode (prompt + half the output). TTFT can be no better than one t_prefill,
TPOT no better than one t_step(C). The figures are bounds, not predictions: real kernels reach a fraction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from engine_svc.model.decoder import head_dim


@dataclass
class Machine:
    bandwidth: float  # bytes/s, device memory copy (read + write counted)
    matmul_rate: float  # FLOP/s, a large square matmul in the serving dtype
    device: str
    dtype: str

    def describe(self) -> str:
        return (
            f"{self.device} {self.dtype}: copy bandwidth {self.bandwidth / 1e9:.1f} GB/s, "
            f"matmul {self.matmul_rate / 1e12:.2f} TFLOP/s (measured)"
        )


def measure(device: str, dtype: torch.dtype) -> Machine:
    """Copy bandwidth and matmul rate on `device` (a second or two)."""
    dev = torch.device(device)
    on_cuda = dev.type == "cuda"
    size = (1 << 30) if on_cuda else (256 << 20)
    src = torch.empty(size // 2, dtype=torch.float16, device=dev).fill_(1)
    dst = torch.empty_like(src)

    def sync():
        if on_cuda:
            torch.cuda.synchronize(dev)

    def timed(fn, repeat: int) -> float:
        """The best of `repeat` timings (after one warm-up call): the rate the hardware reaches."""
        fn()
        sync()
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            sync()
            best = min(best, time.perf_counter() - start)
        return best

    copy = timed(lambda: dst.copy_(src), 20 if on_cuda else 8)
    n = 8192 if on_cuda else 2048
    a = torch.randn(n, n, device=dev).to(dtype)
    b = torch.randn(n, n, device=dev).to(dtype)
    out = torch.empty(n, n, device=dev, dtype=dtype)
    mm = timed(lambda: torch.matmul(a, b, out=out), 20 if on_cuda else 6)
    return Machine(2 * size / copy, 2 * n**3 / mm, str(dev), str(dtype).removeprefix("torch."))


@dataclass
class ModelShape:
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    dtype_bytes: int

    @classmethod
    def from_config(cls, config, dtype_bytes: int) -> ModelShape:
        """A mixture of experts (Qwen3 MoE) counts the experts a token runs (top-k of them) as its MLP: the
        bound of a decode step where few tokens share experts; a large batch reads more experts than that."""
        experts = getattr(config, "num_experts_per_tok", 0)
        return cls(
            config.num_hidden_layers,
            config.hidden_size,
            experts * config.moe_intermediate_size if experts else config.intermediate_size,
            config.num_attention_heads,
            getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
            head_dim(config),
            config.vocab_size,
            bool(getattr(config, "tie_word_embeddings", False)),
            dtype_bytes,
        )

    @property
    def matmul_params(self) -> int:
        """Weights a token's forward multiplies by: every layer's projections and the vocabulary head."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        layer = self.hidden * (q + 2 * kv) + q * self.hidden + 3 * self.hidden * self.intermediate
        return self.layers * layer + self.vocab * self.hidden

    @property
    def weight_bytes(self) -> int:
        """Bytes a decode step reads: the matmul weights (the embedding table is read a row per token)."""
        return self.matmul_params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


def bounds(
    shape: ModelShape,
    machine: Machine,
    concurrency: int,
    prompt_len: float,
    cached_len: float,
    output_len: float,
) -> dict[str, float]:
    """The roofline figures for a closed loop of `concurrency` streams with these mean lengths."""
    c, new = max(concurrency, 1), max(prompt_len - cached_len, 1.0)
    ctx = prompt_len + output_len / 2
    step = max(
        (shape.weight_bytes + c * ctx * shape.kv_bytes_per_token) / machine.bandwidth,
        2 * c * shape.matmul_params / machine.matmul_rate,
    )
    attention = 4 * shape.layers * shape.heads * shape.head_dim * new * (cached_len + new / 2)
    prefill = (2 * shape.matmul_params * new + attention) / machine.matmul_rate
    round_s = output_len * step + c * prefill
    return {
        "output_tok_per_s": c * output_len / round_s,
        "total_tok_per_s": c * (output_len + prompt_len) / round_s,
        "request_per_s": c / round_s,
        "ttft_s": prefill,
        "tpot_s": step,
    }
