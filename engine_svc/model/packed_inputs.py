"""A step's integer inputs packed into one tensor, so they reach the device in one copy, and read back by name.

A step feeds the model a dozen small int64 arrays (token ids, positions, cache slots, context lengths, block
tables, logits rows, ...). Sent one by one, each is a host-to-device copy and a launch of its own; packed, a
step pays for one. Each segment is declared once, by name, as it is appended, and read back by that name as a
view of the packed tensor or of any copy of it (the device's, or a CUDA graph's static input buffer).

Every segment starts 16 bytes into alignment (an even number of values in): Triton compiles a kernel once per
alignment of its pointer arguments, so segments at odd offsets would make the kernels that read them compile
again, at serving time, whenever a step's segment sizes change the parity.
"""

from __future__ import annotations

import array

import torch


class PackedInputs:
    """Append named segments, make the one host tensor, then view any copy of it segment by segment."""

    def __init__(self) -> None:
        # array("q").fromlist takes ints several times faster than torch.tensor does from a long list (and
        # twice as fast as array.extend, which goes through the iterator protocol).
        self._values = array.array("q")
        self._shapes: dict[str, tuple[int, int] | None] = {}  # by name, in packing order
        self._sizes: list[int] = []  # of every part: the segments, each after its padding (if any)
        self._padded: list[bool] = []  # per segment: a padding value precedes it

    def add(self, name: str, values: list[int], shape: tuple[int, int] | None = None) -> None:
        """Append `values` as segment `name`: a flat view, or a matrix of `shape`."""
        if name in self._shapes:
            raise ValueError(f"segment {name!r} is already packed")
        pad = len(self._values) % 2 == 1
        if pad:
            self._values.append(0)
            self._sizes.append(1)
        self._values.fromlist(values)
        self._shapes[name] = shape
        self._sizes.append(len(values))
        self._padded.append(pad)

    @property
    def size(self) -> int:
        return len(self._values)

    def host(self) -> torch.Tensor:
        """Every segment in one CPU int64 tensor (sharing this builder's memory: add nothing afterwards)."""
        if not self._values:
            return torch.zeros(0, dtype=torch.int64)
        return torch.frombuffer(self._values, dtype=torch.int64)

    def views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each segment by name, as a view of `flat`: the host tensor or a copy of it (same size and layout).
        One split makes them all (a third faster than slicing segment by segment, for a step's seven or so)."""
        parts = iter(flat.split_with_sizes(self._sizes))
        views = {}
        for (name, shape), padded in zip(self._shapes.items(), self._padded):
            if padded:
                next(parts)
            part = next(parts)
            views[name] = part if shape is None else part.view(shape)
        return views

    def to(self, device: torch.device) -> dict[str, torch.Tensor]:
        """The segments on `device`, after one host-to-device copy (none on the CPU)."""
        return self.views(self.host().to(device))

    def copy_into(self, buffer: torch.Tensor) -> dict[str, torch.Tensor]:
        """The segments as views of the front of `buffer` (a CUDA graph's static inputs), filled in one copy."""
        flat = buffer[: self.size]
        flat.copy_(self.host(), non_blocking=True)
        return self.views(flat)
