"""Runs scheduled chunks through the fused model and returns the logits rows that are needed.

Decode-only steps on CUDA replay a CUDA graph captured per (batch bucket, block-table width bucket) with
static input buffers; where the attention's work does not depend on the width, a batch bucket has one graph, at
the widest, so warm-up captures it and no step under load stalls for a capture when a new width first appears.
Mixed or prefill steps of up to the step budget (16,384 tokens at most) replay piecewise graphs around eager
attention (piecewise.py), larger ones run eagerly. `decode_loop` chains decode steps on the device
(each step's sampled tokens become the next step's input) so the engine can queue steps ahead of the host;
the graph advances positions and slots itself and leaves the greedy tokens as the next input.
Logits are computed only for rows that sample (a chunk that reaches the end of its sequence) and for
prompt-logprob positions. A step's integer inputs and attention metadata come from step_inputs.py. Where the
sliding-window layers have a KV pool of their own (kv_groups.py, scheduling/window_pool.py), their cache tensors
have that pool's blocks and read the sequences' second tables. With LoRA on (`lora=True`, lora.py) each step's rows
are grouped by adapter before the forward, and every step runs eagerly in plain torch modules (no CUDA graphs, no
skinny or fp8 kernels): an adapter's rows differ from step to step, which a captured graph cannot follow.
"""

from __future__ import annotations

import bisect
import logging

import torch

from engine_svc.model.attention import AttentionMetadata, make_backend
from engine_svc.model.decoder import FusedDecoder, head_dim
from engine_svc.model.fp8_linear import Fp8Linear, Fp8NormedProjection
from engine_svc.model.fused_ops import FusedOps
from engine_svc.model.lora import Loras
from engine_svc.model.piecewise import PiecewiseSteps
from engine_svc.model.runner_api import DecodeStep
from engine_svc.model.sampler import argmax_rows
from engine_svc.model.step_inputs import StepInputs, is_decode
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.sequence import Chunk, Sequence

log = logging.getLogger(__name__)

# Decode batches of up to this many rows get a graph at every table width before serving (their logits are small).
WARM_EVERY_WIDTH_ROWS = 16


def kv_cache_torch_dtype(name: str, model_dtype: torch.dtype) -> torch.dtype:
    """--kv-cache-dtype: auto (the model's dtype) or fp8 (float8 e4m3)."""
    return torch.float8_e4m3fn if name == "fp8" else model_dtype


def _next_power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


class ModelRunner:
    """The paged fast path (a `Runner`): its KV cache lives in blocks that the scheduler's pool hands out."""

    chains_decode_steps = True
    kv_in_pool_blocks = True

    def __init__(
        self,
        hf_model,
        *,
        block_size: int,
        num_blocks: int,
        max_num_seqs: int,
        max_model_len: int,
        cuda_graphs: bool,
        compile_kernels: bool = False,
        attention: str = "sdpa",
        mixed_step_graphs_up_to: int = 0,
        quantization: str = "none",
        kv_cache_dtype: str = "auto",
        consume_model: bool = False,
        lora: bool = False,
    ):
        """`mixed_step_graphs_up_to`: mixed and prefill steps of up to this many tokens (at most 16,384) replay
        piecewise CUDA graphs (with CUDA graphs and the Triton attention); 0: they all run eagerly.
        `quantization`: "fp8" runs the layers' projections in e4m3 (fp8_linear.py), "mxfp4" holds a mixture's
        experts in MXFP4 (gpt-oss's checkpoints' format, mxfp4.py), "none" runs in the model's dtype.
        `kv_cache_dtype`: "fp8" caches K/V as e4m3 (unscaled, as vLLM's default: half the bytes, twice the
        tokens), "auto" in the model's dtype. `consume_model`: the fused model takes `hf_model`'s decoder layers
        away (nothing else uses them). `lora`: LoRA adapters can be attached (`self.loras`); steps run eagerly."""
        self.model = FusedDecoder(hf_model, max_model_len, FusedOps(compile_kernels), consume_model)
        self.loras = Loras(self.model) if lora else None
        # Eager (mixed and prefill) steps skip the compiled kernels: their per-call guard checks cost more host
        # time than the fusion saves on a step that is launch-bound anyway; graphs capture the compiled ones.
        self.eager_ops = FusedOps(False)
        if quantization == "fp8":
            if attention == "triton":  # Triton is there: one kernel per quantization, not Inductor's two or three
                from engine_svc.model import triton_fp8

                for ops in (self.model.ops, self.eager_ops):
                    ops.quantize_rows, ops.silu_mul_quant = triton_fp8.quantize_rows, triton_fp8.silu_mul_quant
            quantize = self.model.ops.quantize_rows
            self.model.quantize_projections(lambda linear: Fp8Linear(linear, quantize), Fp8NormedProjection)
        elif quantization == "mxfp4":
            self.model.experts_to_mxfp4()
        layer = self.model.layer0
        weight = self.model.embed.weight
        self.device, self.dtype = weight.device, weight.dtype
        self.kv_dtype = kv_cache_torch_dtype(kv_cache_dtype, self.dtype)
        self.vocab_size = hf_model.config.vocab_size
        self.block_size = block_size
        self.max_blocks_per_seq = -(-max_model_len // block_size)
        self.attention = attention
        family = self.model.family
        self.backend = make_backend(
            attention, layer.num_heads, layer.num_kv_heads, layer.head_dim, family.attention_scale,
            family.attention_softcap,
        )  # fmt: skip
        if attention == "triton" and not lora:  # Triton is there: small decode batches may take the skinny matmuls
            from engine_svc.model.triton_linear import SkinnyLinear, SkinnyNormedProjection, SkinnyNormedRouter
            from engine_svc.model.triton_silu import silu_mul

            self.model.use_skinny_kernels(SkinnyLinear, SkinnyNormedProjection, SkinnyNormedRouter)
            self.eager_ops.silu_mul = silu_mul  # one kernel, not torch's two over strided halves
        if self.device.type == "cpu" and quantization == "none" and not lora:
            self.model.split_gate_up()
        self.cuda_graphs = cuda_graphs and self.device.type == "cuda" and not lora
        self.batch_buckets = sorted({1, 2, 4, 8, *range(16, max_num_seqs + 16, 16)})
        self.graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.graph_pool = None
        self.inputs = StepInputs(block_size)  # builds each step's packed inputs and metadata
        self._static_inputs()
        self.pieces = None
        if self.cuda_graphs and attention == "triton" and mixed_step_graphs_up_to:
            self.pieces = PiecewiseSteps(self.model, self.backend, block_size, mixed_step_graphs_up_to)
        self.kv_caches: list[torch.Tensor] = []
        self.kv_generation = 0  # counts the cache's allocations: a peer that mapped an older one maps again (P/D)
        self.kv_blocks = (0, 0)  # what allocate_kv was given
        if num_blocks:
            self.allocate_kv(num_blocks)

    @property
    def window_group(self) -> int:
        """The window of the layers with a KV pool of their own (kv_groups.py); 0: one pool."""
        return self.inputs.window_group

    def _static_inputs(self) -> None:
        """The decode graphs' inputs: room for the largest decode batch at the widest block table."""
        if not self.cuda_graphs:
            return
        widest = self._width_bucket(self.max_blocks_per_seq)
        largest = self.inputs.decode([], self.batch_buckets[-1], widest)
        self.static = torch.zeros(largest.size, dtype=torch.int64, device=self.device)
        # The block tables the graphs read, a row every `widest` values: a graph of any width reads its columns.
        self.static_tables = torch.zeros(self.batch_buckets[-1], widest, dtype=torch.int64, device=self.device)
        self.static_window_tables = torch.zeros_like(self.static_tables) if self.window_group else None

    def allocate_kv(self, num_blocks: int, window_blocks: int = 0) -> None:
        """The KV cache: `num_blocks` blocks per layer (block 0 is the scratch block), replacing any before;
        with `window_blocks`, the sliding-window layers get that many in a pool of their own (their tables are
        Sequence.window_block_ids: scheduling/window_pool.py)."""
        self._kv(num_blocks, window_blocks)
        self.kv_blocks = (num_blocks, window_blocks)
        self.max_blocks_per_seq = min(self.max_blocks_per_seq, num_blocks - 1)

    def _kv(self, num_blocks: int, window_blocks: int = 0) -> None:
        layer = self.model.layer0
        windows = set(self.model.family.windows) - {0}
        assert not window_blocks or len(windows) == 1, "a pool of their own needs one window size"
        window_group = windows.pop() if window_blocks else 0
        if window_group != self.window_group:
            self.inputs.window_group = window_group
            self._static_inputs()
            if self.pieces is not None:
                self.pieces.windowed = bool(window_group)
        shape = lambda blocks: (blocks * self.block_size, 2, layer.num_kv_heads, layer.head_dim)  # noqa: E731
        self.graphs.clear()  # captured over the old cache
        if self.pieces is not None:
            self.pieces.forget()
        self.kv_caches = []  # the old cache goes before the new one is made
        self.kv_caches = [
            torch.zeros(
                shape(window_blocks if window_group and w else num_blocks), dtype=self.kv_dtype, device=self.device
            )
            for w in self.model.family.windows
        ]
        self.kv_generation += 1

    @torch.inference_mode()
    def step_peak_bytes(self, tokens: int, rows: int) -> int:
        """CUDA: the most memory a step of `tokens` tokens that samples `rows` rows allocates beyond what is held
        now (its activations and logits), measured by running one on a scratch cache; the KV cache is sized
        after it, so the largest step the scheduler may build still fits (no row longer than the model's context:
        fewer rows than `tokens` needs take less). 0 elsewhere."""
        if self.device.type != "cuda":
            return 0
        rows = max(1, min(rows, tokens))
        tokens = min(tokens, rows * self.model.max_model_len)
        self._kv(1 + -(-tokens // self.block_size) + rows)
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        held = torch.cuda.memory_allocated(self.device)
        self._scratch_step(tokens, rows)
        torch.cuda.synchronize(self.device)
        peak = torch.cuda.max_memory_allocated(self.device) - held
        self.kv_caches = []
        return peak

    @staticmethod
    def kv_bytes_per_block(config, block_size: int, dtype: torch.dtype) -> int:
        kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        per_token = 2 * config.num_hidden_layers * kv_heads * head_dim(config)
        return per_token * block_size * torch.empty((), dtype=dtype).element_size()

    def forget(self, seq: Sequence) -> None:
        """Nothing to drop: a sequence's cache is its blocks, which the scheduler frees."""

    def _width_bucket(self, blocks: int) -> int:
        return min(_next_power_of_two(blocks), self.max_blocks_per_seq)

    def _graph_width(self, rows: int, width: int) -> int:
        """The block-table width of the decode graph that runs `rows` rows whose tables are `width` wide: the
        widest where the attention backend's work at that many rows does not depend on it (one graph serves
        every width: each row reads only its own blocks, and the columns past `width` go unread)."""
        widest = self._width_bucket(self.max_blocks_per_seq)
        return widest if self.backend.decode_width_free(rows, widest * self.block_size) else width

    @torch.inference_mode()
    def execute(self, chunks: list[Chunk]) -> torch.Tensor:
        """Logits rows: one per sampling chunk (in order), then one per prompt-logprob position (in order)."""
        if self.cuda_graphs and all(map(is_decode, chunks)) and len(chunks) <= self.batch_buckets[-1]:
            return self.decode_loop(chunks)(None)[0]
        return self._eager(chunks)

    def _decode_step(self, ids, positions, meta: AttentionMetadata, ops=None) -> torch.Tensor:
        """One decode step from the previous one's state (what a graph captures): advance positions, lengths
        and cache slots by one token, run the model, and leave each row's argmax in `ids` as the next input
        (the greedy choice; sampled batches overwrite it)."""
        self.backend.advance(positions, meta)
        if meta.windowed is not None:
            self.backend.advance_slots(positions, meta.windowed)
        logits = self.model(ids, positions, meta, self.kv_caches, self.backend, ops=ops)
        argmax_rows(logits, out=ids)
        return logits

    def decode_loop(self, chunks: list[Chunk]) -> DecodeStep:
        """A function that runs the next decode step of the decode-only `chunks` and returns (logits, the
        greedy tokens: each row's argmax, a device view).

        Given the tokens sampled in the previous step (None the first time, or the greedy view itself when
        the batch is greedy) it feeds them in; positions, slots and context lengths advance on the device,
        so consecutive steps need no host round trip. The sequences' blocks must already cover every step.
        """
        n = len(chunks)
        graphs = self.cuda_graphs and n <= self.batch_buckets[-1]
        widest = max(len(c.seq.block_ids) for c in chunks)
        rows = self.batch_buckets[bisect.bisect_left(self.batch_buckets, n)] if graphs else n
        width = self._width_bucket(widest) if graphs else widest
        packed = self.inputs.decode(chunks, rows, width, back=1)
        if graphs:
            graph, logits = self._graph(rows, self._graph_width(rows, width))
            inputs = packed.copy_into(self.static)
            self.static_tables[:rows, :width].copy_(inputs["block_tables"])
            if self.static_window_tables is not None:
                self.static_window_tables[:rows, :width].copy_(inputs["window_tables"])
        else:
            inputs = packed.to(self.device)
        ids, positions, meta = inputs["ids"], inputs["positions"], self.inputs.metadata(inputs, rows)
        greedy = ids[:n]
        adapters = [c.seq.lora_id for c in chunks] if self.loras is not None else []

        def step(tokens: torch.Tensor | None):
            if tokens is not None and tokens is not greedy:
                greedy.copy_(tokens)
            if not graphs:
                self._lora_rows(adapters)  # each step: another step (a draft's, a prefill) may have run between
                return self._decode_step(ids, positions, meta, self.eager_ops)[:n], greedy
            graph.replay()
            return logits[:n], greedy

        return step

    @torch.inference_mode()
    def warm_up(self) -> None:
        """Before serving: on CUDA the decode graph of every batch bucket (at the narrowest block table, and for
        one row at every width), then one prefill step, so compiles, kernel tuning and the choices between fused
        and unfused kernels (made against the compiled ops the graphs use) happen here instead of stalling the
        first requests that need them."""
        if self.cuda_graphs:
            widths = sorted({self._width_bucket(1 << i) for i in range(self.max_blocks_per_seq.bit_length())})
            for rows in self.batch_buckets:
                # A few rows at every width; more at one: the widest where it serves every width (Triton), else
                # the narrowest, the wider ones captured at first use (SDPA).
                for width in widths if rows <= WARM_EVERY_WIDTH_ROWS else widths[:1]:
                    self._graph(rows, self._graph_width(rows, width))
            if self.pieces is not None:
                self.pieces.pool = self.graph_pool
                self.pieces.capture_all(self.kv_caches)
                self.graph_pool = self.pieces.pool
        self._scratch_step(2, 1)
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def _scratch_step(self, tokens: int, rows: int) -> None:
        """A prefill step of `tokens` tokens over `rows` sequences, written to the cache from block 1 on (block 0
        is the scratch block); before serving, when no block holds anything yet."""
        chunks, block = [], 1
        for i in range(rows):
            seq = Sequence(f"scratch-{i}", 0, [1] * (tokens // rows + (i < tokens % rows)), SamplingConfig())
            count = -(-len(seq.prompt_ids) // self.block_size)
            seq.block_ids, block = list(range(block, block + count)), block + count
            seq.window_block_ids = list(seq.block_ids)
            chunks.append(Chunk(seq, 0, len(seq.prompt_ids)))
        self._eager(chunks, graphs=False)

    def _graph(self, rows: int, width: int):
        """The decode graph of (batch bucket, width bucket) and its logits buffer, captured on first use."""
        return self.graphs.get((rows, width)) or self._capture(rows, width)

    def _capture(self, rows: int, width: int):
        packed = self.inputs.decode([], rows, width)  # for its layout: the values are zeros
        flat = self.static[: packed.size]
        flat.zero_()
        inputs = packed.views(flat)
        inputs["block_tables"] = self.static_tables[:rows, :width]
        inputs["block_tables"].zero_()
        if self.static_window_tables is not None:
            inputs["window_tables"] = self.static_window_tables[:rows, :width]
            inputs["window_tables"].zero_()
        ids, positions, meta = inputs["ids"], inputs["positions"], self.inputs.metadata(inputs, rows)
        run = lambda: self._decode_step(ids, positions, meta)  # noqa: E731
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.graph_pool, capture_error_mode="thread_local"):
            logits = run()
        self.graph_pool = graph.pool()
        self.graphs[(rows, width)] = (graph, logits)
        log.debug("captured decode graph batch=%d blocks=%d", rows, width)
        return graph, logits

    def _eager(self, chunks: list[Chunk], graphs: bool = True) -> torch.Tensor:
        """A mixed or prefill step, every input in one host-to-device copy (step_inputs.py). With `graphs`, a step
        that fits a piecewise bucket pads its ids, positions and slots to it and replays the pieces."""
        pieces = self.pieces if graphs else None
        step = self.inputs.mixed(chunks, pieces.bucket if pieces else None, self.backend.wants_prefill_table)
        flat = step.packed.host().to(self.device)
        inputs = step.packed.views(flat)
        meta = self.inputs.mixed_metadata(step, inputs)
        if self.loras is not None:  # a row per token: built only with LoRA on (a mixed step has thousands)
            decodes = [c.seq.lora_id for c in chunks if is_decode(c)]
            self._lora_rows(decodes + [c.seq.lora_id for c in step.prefills for _ in range(c.num_tokens)])
        if pieces is not None and step.bucket:
            return pieces.run(
                step.tokens, step.bucket, flat, meta, self.kv_caches, inputs["logits_rows"], self.eager_ops
            )
        return self.model(
            inputs["ids"],
            inputs["positions"],
            meta,
            self.kv_caches,
            self.backend,
            logits_rows=inputs["logits_rows"],
            ops=self.eager_ops,
        )

    def _lora_rows(self, row_ids: list[int]) -> None:
        """Each row of the step about to run: its adapter (0: none), in the flat batch's order (decodes first)."""
        if self.loras is not None:
            self.loras.rows.set(row_ids, self.device)
