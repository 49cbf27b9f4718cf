"""release_thread_team: a thread that ran torch's parallel ops hands its OpenMP workers back, and torch keeps
computing right in it afterwards (a new team comes when it needs one)."""

from __future__ import annotations

import sys
import threading

import pytest
import torch

from engine_svc.serving import openmp


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_finds_the_openmp_runtime_torch_loaded():
    if "OpenMP" not in torch.__config__.parallel_info():
        pytest.skip("this torch build does not use OpenMP")
    assert openmp._runtimes()


def test_a_thread_releases_its_team_and_still_computes():
    big = torch.arange(1 << 20, dtype=torch.float32)  # above the parallel grain: runs on the thread's team
    results: list[float] = []

    def work() -> None:
        results.append(float((big * 2).sum()))
        openmp.release_thread_team()
        results.append(float((big * 2).sum()))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    openmp.release_thread_team()  # the main thread too, with or without a team
    assert results == [float((big * 2).sum())] * 2
