"""Float64 tallies that the API servers of one engine add to, each in a row of its own, summed when read.

A request is counted by the API server that served it, in its own row; whichever API server is asked sums
every row, so the engine's totals are whole and nothing is counted twice. With several API servers the rows
live in shared memory (a `multiprocessing` RawArray, handed to the others when they are spawned); with one,
in this process. One writer per row, whole float64 stores: no lock (a reader may catch a histogram's bucket
without its sum for an instant, which a scrape tolerates).

prometheus_client's own multiprocess mode does not fit: it is chosen for the whole process when the library
is imported (PROMETHEUS_MULTIPROC_DIR), so it would move every series of the process, ours too, into its files.
"""

from __future__ import annotations

import multiprocessing
from array import array

import numpy as np


class Tallies:
    def __init__(self, width: int, rows: int = 1, shared=None, row: int = 0):
        """`shared`: the first API server's RawArray (`self.shared`), in the others; `row`: which one is ours."""
        if shared is None and rows > 1:
            shared = multiprocessing.get_context("spawn").RawArray("d", width * rows)
        self.shared = shared
        values = shared if shared is not None else array("d", bytes(8 * width))
        self._all = memoryview(values).cast("B").cast("d")
        self.width, self.rows = width, len(self._all) // width
        self.row = self._all[row * width : (row + 1) * width]  # what this process adds to

    def sums(self) -> np.ndarray:
        """Each tally summed over the rows."""
        return np.asarray(self._all, dtype=np.float64).reshape(self.rows, self.width).sum(axis=0)
