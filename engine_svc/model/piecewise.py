"""CUDA graphs for mixed prefill+decode steps, piecewise: everything but attention replays from graphs.

An eager mixed step launches a dozen kernels a layer from Python (~10 ms of host time for a 1B model's 16
layers, whatever the step's size), so a step that admits a short prompt next to a decode batch, as every
turn of a multi-turn chat does, is bound by the host; so is a 1B model's 7,000-token step (51 ms eager for
30 ms of GPU time on an H200). Attention is the one part whose launch depends on the
step's layout (how many decode rows and prefill chunks, their lengths and block tables); the rest depends
only on the number of tokens. So a step of up to `buckets[-1]` tokens is padded to a token bucket and runs
as L + 1 graph pieces around L eager attention calls (vLLM's piecewise CUDA graphs, without torch.compile's
graph splitting):

    piece 0:  embed, RoPE tables, layer 0 up to its attention (qkv, RoPE, K/V to the cache)
    piece i:  layer i-1 after its attention (o_proj, MLP), layer i up to its attention
    piece L:  layer L-1 after its attention

Pieces talk through static buffers (the token ids, positions and cache slots, and the slots in the sliding-window
layers' own pool where they have one; q; the attention output; the hidden state and residual), so each graph's own memory is scratch, and every piece of every bucket shares
one pool. Padding rows compute garbage that no real row reads: they write K/V to the scratch slot 0 and no
attention call reads or writes them. The vocabulary head runs eagerly on the rows that need logits.
"""

from __future__ import annotations

import logging

import torch

from engine_svc.model.attention import AttentionBackend, AttentionMetadata
from engine_svc.model.decoder import DecoderLayer, FusedDecoder, whole

log = logging.getLogger(__name__)

# Token buckets: a step pads to the smallest that holds it. 512 apart from 2,048 on, so a large step pads by
# under 7% (a full step, the usual large one, not at all); only those up to the step budget are captured.
BUCKETS = (16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, *range(2048, 16384 + 1, 512))


class PiecewiseSteps:
    """The piece graphs of every token bucket up to `max_tokens`, captured on first use (or by `capture_all`)."""

    def __init__(self, model: FusedDecoder, backend: AttentionBackend, block_size: int, max_tokens: int):
        self.model, self.backend, self.block_size = model, backend, block_size
        # Even sizes only: the packed segments after the ids must start where the graphs read them.
        largest = min(max_tokens + max_tokens % 2, BUCKETS[-1])
        self.buckets = [b for b in BUCKETS if b < largest] + [largest]
        self.layers: list[DecoderLayer] = list(model.layers)  # type: ignore[arg-type]
        layer, weight = self.layers[0], model.embed.weight
        hidden, head_dim = weight.shape[1], layer.head_dim
        new = lambda *shape: torch.zeros(shape, dtype=weight.dtype, device=weight.device)  # noqa: E731
        # ids, positions, slots (and window slots, `windowed`), each `bucket` long: the step's first packed segments.
        self.windowed = False
        self.tokens = torch.zeros(4 * largest, dtype=torch.int64, device=weight.device)
        self.q, self.attn = new(largest, layer.num_heads, head_dim), new(largest, layer.num_heads, head_dim)
        self.x, self.residual = new(largest, hidden), new(largest, hidden)
        tables = model.cos.shape[0]  # RoPE tables (one per layer kind that has its own)
        self.cos, self.sin = new(tables, largest, 1, head_dim), new(tables, largest, 1, head_dim)
        self.graphs: dict[int, list[torch.cuda.CUDAGraph]] = {}
        self.pool = None  # set by the runner: its decode graphs' pool, which these share

    def bucket(self, tokens: int) -> int | None:
        """The token bucket a step of `tokens` tokens pads to; None when it is too large (it runs eagerly)."""
        return next((b for b in self.buckets if b >= tokens), None)

    def run(self, tokens: int, bucket: int, packed: torch.Tensor, meta: AttentionMetadata, kv_caches, logits_rows, ops):
        """The step of `tokens` tokens whose inputs are `packed` on the device (ids, positions and slots padded
        to `bucket` first) and whose attention `meta` describes: its logits rows. `ops`: the head's functions."""
        streams = 4 if self.windowed else 3
        self.tokens[: streams * bucket].copy_(packed[: streams * bucket])
        graphs = self.graphs.get(bucket) or self._capture(bucket, kv_caches)
        q, attn = self.q[:tokens], self.attn[:tokens]  # attention sees the real rows only
        for graph, kv_cache, layer in zip(graphs, kv_caches, self.layers):
            graph.replay()
            group = meta.for_window(layer.window)
            self.backend.forward(q, None, kv_cache, group, out=attn, window=layer.window, sinks=layer.sinks)
        graphs[-1].replay()
        return self.model.logits(self.x[:bucket], self.residual[:bucket], logits_rows, ops)

    def capture_all(self, kv_caches) -> None:
        for bucket in self.buckets:
            if bucket not in self.graphs:
                self._capture(bucket, kv_caches)

    def forget(self) -> None:
        """Drop the graphs (they hold the KV cache's addresses: the runner calls this when it replaces it)."""
        self.graphs.clear()

    def _capture(self, bucket: int, kv_caches) -> list[torch.cuda.CUDAGraph]:
        pieces = [self._piece(bucket, i, kv_caches) for i in range(len(self.layers) + 1)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # first calls (compiles, kernel choices) outside any capture
            for piece in pieces:
                piece()
        torch.cuda.current_stream().wait_stream(side)
        graphs = []
        for piece in pieces:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
                piece()
            self.pool = graph.pool()
            graphs.append(graph)
        self.graphs[bucket] = graphs
        log.debug("captured %d piece graphs for %d-token steps", len(graphs), bucket)
        return graphs

    def _piece(self, bucket: int, index: int, kv_caches):
        """Piece `index` of a `bucket`-token step: reads and writes only the static buffers (and the cache)."""
        model, layers, ops = self.model, self.layers, self.model.ops
        ids, positions, slots, window_slots = self.tokens[: 4 * bucket].view(4, bucket)
        meta = AttentionMetadata(slot_mapping=slots, block_size=self.block_size)  # what `store` reads
        if self.windowed:
            meta.windowed = AttentionMetadata(slot_mapping=window_slots, block_size=self.block_size)
        q, attn, x_out, residual = self.q[:bucket], self.attn[:bucket], self.x[:bucket], self.residual[:bucket]
        cos, sin = self.cos[:, :bucket], self.sin[:, :bucket]

        def piece() -> None:
            if index == 0:
                x, res = model.embed_tokens(ids), None
                rope = model.rope(positions)
                cos.copy_(rope[0])
                sin.copy_(rope[1])
            else:
                x, res = layers[index - 1].after_attention(attn, residual, ops)
            if index == len(layers):
                assert res is not None  # the last piece follows a layer
                x_out.copy_(whole(x))
                residual.copy_(res)
                return
            layer = layers[index]
            group = meta.for_window(layer.window)
            layer_q, _, res = layer.before_attention(x, res, cos, sin, kv_caches[index], group, self.backend, ops)
            q.copy_(layer_q)
            residual.copy_(res)

        return piece
