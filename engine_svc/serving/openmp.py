"""One OpenMP thread team for torch's CPU ops: the step thread's.

libgomp (the OpenMP runtime of torch's CPU wheels) gives every thread that starts a parallel region a team of
worker threads of its own, kept for the thread's life. Once it manages more threads than there are CPUs (the
loading thread's or the event loop's idle team next to the step thread's), it cuts the spin of every barrier
from ~300k to 100 iterations, so each of a step's ~400 parallel ops puts its workers to sleep on a futex and
wakes them again: a batch-8 decode step of the default model took 78 against 62 ms on 2 cores, a down
projection 203 against 108 us. A thread that is done with torch's parallel work (loading, warm-up) hands its
team back with OpenMP 5's `omp_pause_resource_all`; should it run a parallel op again, it gets a new team.
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

OMP_PAUSE_SOFT = 1


def _runtimes() -> list[str]:
    """The OpenMP runtimes loaded in this process (libgomp, or Intel's libiomp), by path; none off Linux."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(maxsplit=5)[-1].strip() for line in maps if "omp" in line}
    except OSError:
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith(("libgomp", "libiomp")))


def release_thread_team() -> None:
    """Stop the calling thread's OpenMP workers (idle ones; they come back if this thread needs them again)."""
    for path in _runtimes():
        try:
            pause = ctypes.CDLL(path).omp_pause_resource_all
        except (OSError, AttributeError):  # an OpenMP older than 5.0
            continue
        pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
        if pause(OMP_PAUSE_SOFT) != 0:
            log.debug("%s: omp_pause_resource_all failed", path)
