"""Programmatic dependent launch (PDL) for a decode step's small Triton kernels (CUDA, Hopper and later).

A batch-1 decode step of a 48-layer model is ~430 kernels in one CUDA graph, most of them a few microseconds
long; at each boundary the GPU drains one kernel, then launches and ramps up the next. Launched with PDL, a
kernel's programs are scheduled as the programs of the one before it exit, and each first waits
(`griddepcontrol.wait`) until that kernel has completed and its writes are visible: the launch overlaps the
predecessor's tail, and nothing is read early. Every kernel here takes `PDL` (constexpr), calls
`wait_for_inputs(PDL)` before any load, and is launched with `**pdl()`. `SCALEOUT_PDL=0` turns it off (A/B
timing); Triton's interpreter and GPUs before sm_90 never use it.
"""
# pyright: reportAttributeAccessIssue=false

from __future__ import annotations

import functools
import os

import torch
import triton  # pyright: ignore[reportMissingImports]
import triton.language as tl  # pyright: ignore[reportMissingImports]
from triton.language.extra.cuda import gdc_wait  # pyright: ignore[reportMissingImports]


@functools.cache
def enabled() -> bool:
    if os.environ.get("SCALEOUT_PDL", "1") == "0" or triton.knobs.runtime.interpret:
        return False
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (9, 0)


def pdl() -> dict[str, bool]:
    """The launch arguments: the kernel's `PDL` constexpr and Triton's `launch_pdl` launch option."""
    on = enabled()
    return {"PDL": on, "launch_pdl": on}


@triton.jit
def wait_for_inputs(PDL: tl.constexpr):
    """Under PDL: wait until the previous kernel in the stream has completed and its writes are visible."""
    if PDL:
        gdc_wait()
