"""What the hardware allows for a workload: weight + KV bytes per decode step against the measured copy
bandwidth, prefill FLOPs against the measured matmul rate.

For C closed-loop streams with mean uncached prompt I_new (on top of I_cached cached tokens) and O output
tokens, one round of the loop (every stream finishing one request) needs O decode steps of the whole batch
and C prefills, so

    output tok/s  <=  C * O / (O * t_step(C) + C * t_prefill)
    t_step(C)     =   max((weights + C * ctx * kv_bytes_per_token) / bandwidth, 2 * C * matmul_params / rate)
    t_prefill     =   (2 * matmul_params * I_new + 4 * layers * q_dim * I_new * (I_cached + I_new / 2)) / rate
                      (one stream, C = 1: at least the bytes of the weights its I_new tokens route to / bandwidth)

with ctx the mean context of a decode (prompt + half the output). A mixture of experts multiplies a token by its
top-k experts, but a decode step of C tokens reads every expert any of them routes to: E * (1 - (1 - k/E)^C)
of the E experts under even routing (what random weights give), so the weights' bytes grow with C (Qwen3-30B-A3B
at 64 streams reads ~126 of its 128 experts a layer). A sliding-window layer (Gemma 2/3, gpt-oss,
Mistral) reads and attends to min(ctx, window) keys, not ctx: its share of the KV bytes and of the attention
FLOPs counts that. TTFT can be no better than one prefill alone, which reads those weights too (at C > 1 the
reads are shared with the batch's decode steps, so the round counts only the prefills' FLOPs),
TPOT no better than one t_step(C). The figures are bounds, not predictions: real kernels reach a fraction.

The bound follows the dtypes the engine runs (`ModelShape.for_flags`): under `--quantization fp8` the layers'
projections are read as one byte a weight and multiplied at the measured fp8 rate (the vocabulary head keeps the
model's dtype), and `--kv-cache-dtype fp8` halves the KV bytes of a bf16 model.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, replace

import torch

from engine_svc.model.decoder import head_dim
from engine_svc.model.family import Family


@dataclass
class Machine:
    bandwidth: float  # bytes/s, device memory copy (read + write counted)
    matmul_rate: float  # FLOP/s, a large square matmul in the serving dtype
    device: str
    dtype: str
    fp8_rate: float | None = None  # FLOP/s, the same matmul in e4m3 (torch._scaled_mm), where the device has it

    def describe(self) -> str:
        fp8 = f", fp8 {self.fp8_rate / 1e12:.2f} TFLOP/s" if self.fp8_rate else ""
        return (
            f"{self.device} {self.dtype}: copy bandwidth {self.bandwidth / 1e9:.1f} GB/s, "
            f"matmul {self.matmul_rate / 1e12:.2f} TFLOP/s{fp8} (measured)"
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
    fp8 = None
    if on_cuda and torch.cuda.get_device_capability(dev) >= (8, 9):
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.ones((), device=dev)
        fp8 = 2 * n**3 / timed(lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16), 20)
    return Machine(2 * size / copy, 2 * n**3 / mm, str(dev), str(dtype).removeprefix("torch."), fp8)


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
    dtype_bytes: int  # the model's dtype: embeddings, the vocabulary head
    projection_bytes: int = 0  # a layer projection's weight (0: dtype_bytes); 1 under --quantization fp8
    kv_bytes: int = 0  # a cached K or V value (0: dtype_bytes); 1 under --kv-cache-dtype fp8
    windows: tuple[int, ...] = ()  # per layer: its sliding window (0: every key); () for none
    experts: int = 0  # a mixture's routed experts a layer (0: dense)
    top_k: int = 0  # the routed experts a token runs
    expert_intermediate: int = 0  # one routed expert's intermediate size

    @classmethod
    def from_config(cls, config, dtype_bytes: int) -> ModelShape:
        """A mixture of experts (Qwen3 MoE, GLM-4.5, gpt-oss) counts the experts a token runs (top-k of them, and
        GLM-4.5's shared ones) as its MLP; `weight_bytes_at` adds the experts a batch reads beyond a token's. Dense
        layers among the routed ones (GLM-4.5's first) count as routed ones."""
        top_k = getattr(config, "num_experts_per_tok", 0)
        experts = top_k + ((getattr(config, "n_shared_experts", None) or 0) if top_k else 0)
        routed = next((getattr(config, k) for k in ("num_experts", "n_routed_experts", "num_local_experts")
                       if getattr(config, k, None)), 0) if top_k else 0  # fmt: skip
        # gpt-oss sizes its experts by intermediate_size (it has no moe_intermediate_size)
        expert_width = (getattr(config, "moe_intermediate_size", None) or config.intermediate_size) if top_k else 0
        return cls(
            config.num_hidden_layers,
            config.hidden_size,
            experts * expert_width if experts else config.intermediate_size,
            config.num_attention_heads,
            getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
            head_dim(config),
            config.vocab_size,
            bool(getattr(config, "tie_word_embeddings", False)),
            dtype_bytes,
            windows=Family.of(config).windows,
            experts=routed,
            top_k=top_k,
            expert_intermediate=expert_width,
        )

    def for_flags(self, flags: list[str]) -> ModelShape:
        """This shape as an engine started with `flags` runs it (fp8 projections, fp8 KV cache)."""
        words = [word for flag in flags for word in flag.split("=", 1)]
        fp8 = {flag for flag, value in itertools.pairwise(words) if value == "fp8"}
        return replace(
            self,
            projection_bytes=1 if "--quantization" in fp8 else self.dtype_bytes,
            kv_bytes=1 if "--kv-cache-dtype" in fp8 else self.dtype_bytes,
        )

    @property
    def projection_params(self) -> int:
        """Every layer's projections."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return self.layers * (self.hidden * (q + 2 * kv) + q * self.hidden + 3 * self.hidden * self.intermediate)

    @property
    def matmul_params(self) -> int:
        """Weights a token's forward multiplies by: every layer's projections and the vocabulary head."""
        return self.projection_params + self.vocab * self.hidden

    @property
    def weight_bytes(self) -> int:
        """Bytes a decode step reads: the matmul weights (the embedding table is read a row per token)."""
        projection = self.projection_bytes or self.dtype_bytes
        return self.projection_params * projection + self.vocab * self.hidden * self.dtype_bytes

    def weight_bytes_at(self, tokens: float) -> float:
        """Bytes a decode step of `tokens` tokens reads: a mixture's expected experts hit (module docstring)."""
        if not self.experts:
            return self.weight_bytes
        hit = self.experts * (1 - (1 - self.top_k / self.experts) ** tokens)
        expert = self.layers * 3 * self.hidden * self.expert_intermediate * (self.projection_bytes or self.dtype_bytes)
        return self.weight_bytes + (hit - self.top_k) * expert

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * (self.kv_bytes or self.dtype_bytes)

    def keys_seen(self, context: float) -> float:
        """Keys a query at `context` attends to, summed over the layers (a windowed layer's stop at its window)."""
        windows = self.windows or (0,) * self.layers
        return sum(min(context, window) if window else context for window in windows)

    def matmul_seconds(self, tokens: float, machine: Machine) -> float:
        """The projections and the head for `tokens` tokens at the rates of their dtypes."""
        fp8 = self.projection_bytes == 1 and machine.fp8_rate
        projection_rate = machine.fp8_rate if fp8 else machine.matmul_rate
        # A mixture's experts are fp8 weights only: multiplied in the model's dtype.
        experts = self.layers * 3 * self.hidden * self.intermediate if self.experts else 0
        head = 2 * tokens * (self.vocab * self.hidden + experts) / machine.matmul_rate
        return 2 * tokens * (self.projection_params - experts) / projection_rate + head


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
        (shape.weight_bytes_at(c) + c * shape.keys_seen(ctx) * shape.kv_bytes_per_token / shape.layers)
        / machine.bandwidth,
        shape.matmul_seconds(c, machine),
    )
    attention = 4 * shape.heads * shape.head_dim * new * shape.keys_seen(cached_len + new / 2)
    compute = shape.matmul_seconds(new, machine) + attention / machine.matmul_rate
    # One prefill alone also reads the weights its tokens route to (a mixture's 128-token prompt: every expert);
    # beside other streams, those reads are shared with their decode steps, so only its FLOPs count.
    alone = max(compute, shape.weight_bytes_at(new) / machine.bandwidth)
    round_s = output_len * step + c * (alone if c == 1 else compute)
    return {
        "output_tok_per_s": c * output_len / round_s,
        "total_tok_per_s": c * (output_len + prompt_len) / round_s,
        "request_per_s": c / round_s,
        "ttft_s": alone,
        "tpot_s": step,
    }
