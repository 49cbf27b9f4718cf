"""A paged step's integer inputs, built on the host from the scheduled chunks, packed into one tensor
(packed_inputs.py) and read back as the attention's metadata.

A decode batch has per row: its token id, position, cache slot, context length and block table (padded to the
batch's width). A mixed or prefill step goes on with the prefill rows' ids, positions and slots, then the logits
rows, every prefill chunk's covering blocks and (for backends that attend chunk by chunk) a table of the chunks.
Where the sliding-window layers have a pool of their own (`window_group`: their window; kv_groups.py), every slot
and table comes twice, the second from `Sequence.window_block_ids`, and the metadata carries that view in
`AttentionMetadata.windowed`; with one pool nothing of it is built.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine_svc.model.attention import AttentionMetadata, PrefillChunk
from engine_svc.model.packed_inputs import PackedInputs
from engine_svc.scheduling.sequence import Chunk

# A decode batch's host values: ids, positions, slots, context lengths, block tables (flattened), and the
# sliding-window layers' slots and tables where they have a pool of their own (else empty).
DecodeColumns = tuple[list[int], list[int], list[int], list[int], list[int], list[int], list[int]]


def is_decode(c: Chunk) -> bool:
    return c.num_tokens == 1 and c.samples and not (c.seq.want_prompt_logprobs and c.prompt_logprob_positions)


@dataclass
class MixedStep:
    """A mixed or prefill step's packed inputs and what reading them back needs."""

    packed: PackedInputs
    tokens: int  # real rows (the ids, positions and slots are padded to `bucket` when there is one)
    bucket: int | None
    num_decodes: int
    prefills: list[Chunk]
    spans: list[tuple[int, int, int]]  # per prefill chunk: its first row, first block in prefill_blocks, count


class StepInputs:
    def __init__(self, block_size: int):
        self.block_size = block_size
        self.window_group = 0  # the window of the layers with a pool of their own; 0: none

    def slot(self, table: list[int], position: int) -> int:
        return table[position // self.block_size] * self.block_size + position % self.block_size

    def slots(self, table: list[int], start: int, end: int) -> list[int]:
        """Cache rows of positions [start, end) of a sequence whose block table is `table`, a block at a time."""
        slots: list[int] = []
        for block in range(start // self.block_size, -(-end // self.block_size)):
            base = table[block] * self.block_size
            lo, hi = max(start - block * self.block_size, 0), min(end - block * self.block_size, self.block_size)
            slots += range(base + lo, base + hi)
        return slots

    def decode_columns(self, chunks: list[Chunk], rows: int, width: int, back: int = 0) -> DecodeColumns:
        """Host values for a decode batch padded to `rows`: ids, positions, slots, context lengths, block tables
        (`width` each); positions and lengths `back` steps behind (for a loop that advances them and the slots
        before each step)."""
        pad = rows - len(chunks)
        ids = [c.seq.token_at(c.start) for c in chunks] + [0] * pad
        positions = [c.start - back for c in chunks] + [-back] * pad
        lengths = [c.start + 1 - back for c in chunks] + [1 - back] * pad
        slots, tables = self._decode_tables(chunks, pad, width, back, lambda s: s.block_ids)
        window_slots, window_tables = [], []
        if self.window_group:
            window_slots, window_tables = self._decode_tables(chunks, pad, width, back, lambda s: s.window_block_ids)
        return ids, positions, slots, lengths, tables, window_slots, window_tables

    def _decode_tables(self, chunks: list[Chunk], pad: int, width: int, back: int, table_of):
        """The decode rows' slots and block tables (`width` each) in the tables `table_of` gives."""
        # A loop that advances derives the slots from the positions on the device.
        slots = [0] * (len(chunks) + pad) if back else [self.slot(table_of(c.seq), c.start) for c in chunks] + [0] * pad
        tables = []
        for c in chunks:
            table = table_of(c.seq)
            tables += table[:width] + [0] * (width - min(len(table), width))
        return slots, tables + [0] * (pad * width)

    def pack_decodes(self, packed: PackedInputs, columns: DecodeColumns, rows: int, width: int) -> None:
        """The decode segments; in a mixed step, ids, positions and slots (both pools') go on with the prefill
        rows."""
        ids, positions, slots, lengths, tables, window_slots, window_tables = columns
        packed.add("ids", ids)
        packed.add("positions", positions)
        packed.add("slots", slots)
        if self.window_group:
            packed.add("window_slots", window_slots)
        packed.add("context_lens", lengths)
        packed.add("block_tables", tables, shape=(rows, width))
        if self.window_group:
            packed.add("window_tables", window_tables, shape=(rows, width))

    def decode(self, chunks: list[Chunk], rows: int, width: int, back: int = 0) -> PackedInputs:
        packed = PackedInputs()
        self.pack_decodes(packed, self.decode_columns(chunks, rows, width, back), rows, width)
        return packed

    def metadata(self, inputs: dict[str, torch.Tensor], num_decodes: int) -> AttentionMetadata:
        """The decode part of the metadata (both pools' views) over the packed segments `inputs`."""
        meta = AttentionMetadata(
            slot_mapping=inputs["slots"],
            block_size=self.block_size,
            num_decodes=num_decodes,
            decode_block_tables=inputs["block_tables"],
            decode_context_lens=inputs["context_lens"],
        )
        if self.window_group:
            meta.windowed = AttentionMetadata(
                slot_mapping=inputs["window_slots"],
                block_size=self.block_size,
                num_decodes=num_decodes,
                decode_block_tables=inputs["window_tables"],
                decode_context_lens=inputs["context_lens"],
            )
        return meta

    def mixed(self, chunks: list[Chunk], bucket_of, prefill_table: bool) -> MixedStep:
        """A mixed or prefill step's inputs: ids, positions and slots over all tokens (decodes first), the
        decodes' context lengths and block tables, the logits rows, and the blocks of every prefill chunk.
        `bucket_of(tokens)`: the piecewise graphs' bucket to pad ids, positions and slots to (None: no padding);
        `prefill_table`: the chunk table too."""
        decodes = [c for c in chunks if is_decode(c)]
        prefills = [c for c in chunks if not is_decode(c)]
        n = len(decodes)
        width = max((len(c.seq.block_ids) for c in decodes), default=0)
        ids, positions, slots, lengths, tables, window_slots, window_tables = self.decode_columns(decodes, n, width)
        sample_row = {id(c): row for row, c in enumerate(decodes)}
        logprob_rows, draft_rows, blocks, window_blocks, spans = [], [], [], [], []
        for c in prefills:
            end = c.start + c.num_tokens
            row = len(ids)
            ids += c.seq.tokens(c.start, end)
            positions += range(c.start, end)
            slots += self.slots(c.seq.block_ids, c.start, end)
            covering = c.seq.block_ids[: -(-end // self.block_size)]
            spans.append((row, len(blocks), len(covering)))
            blocks += covering
            if self.window_group:  # the same layout in the windowed tables
                window_slots += self.slots(c.seq.window_block_ids, c.start, end)
                window_blocks += c.seq.window_block_ids[: len(covering)]
            sample_row[id(c)] = row + c.num_tokens - 1
            logprob_rows += [row + p - c.start for p in c.prompt_logprob_positions]
            draft_rows += range(row + c.num_tokens - 1 - c.num_draft, row + c.num_tokens - 1)
        tokens = len(ids)
        bucket = bucket_of(tokens) if bucket_of is not None else None
        if bucket:  # padding rows: token 0 at position 0, written to the scratch slot
            pad = [0] * (bucket - tokens)
            ids, positions, slots = ids + pad, positions + pad, slots + pad
            window_slots = window_slots + pad if self.window_group else window_slots
        packed = PackedInputs()
        self.pack_decodes(packed, (ids, positions, slots, lengths, tables, window_slots, window_tables), n, width)
        packed.add("logits_rows", [sample_row[id(c)] for c in chunks if c.samples] + logprob_rows + draft_rows)
        packed.add("prefill_blocks", blocks)
        if self.window_group:
            packed.add("window_prefill_blocks", window_blocks)
        if prefill_table:  # for backends that attend chunk by chunk from the cache
            table: list[int] = []
            for c, (row, first, _) in zip(prefills, spans):
                table += (row, c.num_tokens, c.start, first)
            packed.add("prefill_table", table, shape=(len(prefills), 4))
        return MixedStep(packed, tokens, bucket, n, prefills, spans)

    def mixed_metadata(self, step: MixedStep, inputs: dict[str, torch.Tensor]) -> AttentionMetadata:
        """The metadata of a mixed step whose packed inputs are `inputs` (on the device)."""
        meta = self.metadata(inputs, step.num_decodes)
        views = [(meta, inputs["prefill_blocks"])]
        if meta.windowed is not None:
            views.append((meta.windowed, inputs["window_prefill_blocks"]))
        for view, blocks in views:  # the same rows and chunk table, each pool's blocks
            for c, (row, first, count) in zip(step.prefills, step.spans):
                view.prefills.append(PrefillChunk(row, c.num_tokens, c.start, blocks[first : first + count]))
            if "prefill_table" in inputs:
                view.prefill_table, view.prefill_blocks = inputs["prefill_table"], blocks
        return meta
