"""The torch profiler over the engine's model steps: `--profiler-config` (vLLM's ProfilerConfig as JSON, 0.33's keys
and defaults) and EngineControlService.StartProfile / StopProfile, run on the step thread.

A trace records the steps that run the model (a turn that only takes requests in is no step): StartProfile arms it,
`delay_steps` steps pass unrecorded, then it records until StopProfile, or until `max_steps` steps when that is
not 0, and writes itself as a gzipped Chrome trace (open it in Perfetto or chrome://tracing) to
`<directory>/<prefix>-<host>-<pid>-<time>.pt.trace.json.gz`, one per replica.

Keys of vLLM's config this engine has no use for are refused at start by name: another profiler (`cuda`, `proton`
and their keys), CUDA-graph capture profiling, the schedule keys of vLLM's workers (warmup / active / wait
iterations: a trace here records every step between its start and its end), and `ignore_frontend: false` (there is
no front-end profiler: the engine's steps are the trace, as vLLM's with `ignore_frontend: true`).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, fields

from torch.profiler import ProfilerAction, ProfilerActivity, profile

from scaleout.v1 import control_pb2
from scaleout_common.reasons import Reason, fail

FLAG = "--profiler-config"
ACTIVITIES = {"CPU": control_pb2.PROFILE_ACTIVITY_CPU, "CUDA": control_pb2.PROFILE_ACTIVITY_CUDA}
_TORCH = {
    control_pb2.PROFILE_ACTIVITY_CPU: ProfilerActivity.CPU,
    control_pb2.PROFILE_ACTIVITY_CUDA: ProfilerActivity.CUDA,
}


@dataclass(frozen=True)
class ProfilerConfig:
    """vLLM's keys (`torch_profiler_*` for what a trace records)."""

    profiler: str | None = None
    torch_profiler_dir: str = ""
    torch_profiler_activities: list[str] | None = None  # None: CPU, and CUDA on a GPU
    torch_profiler_with_stack: bool = True
    torch_profiler_with_flops: bool = False
    torch_profiler_use_gzip: bool = True
    torch_profiler_dump_cuda_time_total: bool = True  # a table of the ops' CUDA times in the log at the end
    torch_profiler_record_shapes: bool = False
    torch_profiler_with_memory: bool = False
    ignore_frontend: bool = True  # there is no front-end profiler here: false (vLLM's default) is refused
    delay_iterations: int = 0
    max_iterations: int = 0


def parse(text: str) -> ProfilerConfig | None:
    """The config, or None when profiling is off (no flag, or `profiler` null). ValueError names what is refused."""
    if not text:
        return None
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError(f"{FLAG}: a JSON object")
    unknown = sorted(set(raw) - {f.name for f in fields(ProfilerConfig)})
    if unknown:
        raise ValueError(f"{FLAG}: {', '.join(unknown)} not supported (the torch profiler over engine steps only)")
    config = ProfilerConfig(**raw)
    if not config.ignore_frontend:
        raise ValueError(f"{FLAG}: ignore_frontend false not supported (only the engine's steps are traced)")
    if config.profiler is None:
        return None
    if config.profiler != "torch":
        raise ValueError(f"{FLAG}: profiler {config.profiler!r} not supported (torch)")
    if not os.path.isabs(config.torch_profiler_dir):
        raise ValueError(f"{FLAG}: torch_profiler_dir must be an absolute path")
    for name in config.torch_profiler_activities or ():
        if name not in ACTIVITIES:
            raise ValueError(f"{FLAG}: torch_profiler_activities {name!r} is not one of {sorted(ACTIVITIES)}")
    if min(config.delay_iterations, config.max_iterations) < 0:
        raise ValueError(f"{FLAG}: delay_iterations and max_iterations are >= 0")
    return config


def add_flags(parser) -> None:
    parser.add_argument(
        FLAG,
        default="",
        help='vLLM\'s profiler config as JSON, e.g. {"profiler": "torch", "torch_profiler_dir": "/traces"}: '
        "enables StartProfile / StopProfile (and /start_profile, /stop_profile), traces of the engine's steps",
    )


@dataclass
class _Trace:
    profiler: profile
    path: str
    delay: int
    left: int  # steps still to record (0: until StopProfile)
    steps: int = 0
    running: bool = False


class StepProfiler:
    """One trace at a time; every method runs on the step thread."""

    def __init__(self, config: ProfilerConfig, cuda: bool):
        self.config = config
        self.cuda = cuda
        self.trace: _Trace | None = None
        self.last: tuple[str, int] | None = None  # a trace that ended by itself: what StopProfile then answers

    def start(self, request: control_pb2.StartProfileRequest) -> str:
        if self.trace is not None:
            raise fail(Reason.PROFILER_STATE, "a trace is running: StopProfile ends it")
        config = self.config
        for name in ("delay_steps", "max_steps"):
            if request.HasField(name) and getattr(request, name) < 0:
                raise fail(Reason.INVALID_REQUEST, f"{name} must be >= 0", name)
        directory = request.directory or config.torch_profiler_dir
        if not os.path.isabs(directory):
            raise fail(Reason.INVALID_REQUEST, "directory must be an absolute path", "directory")
        os.makedirs(directory, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"{request.prefix or 'engine'}-{socket.gethostname()}-{os.getpid()}-{stamp}.pt.trace.json"
        path = os.path.join(directory, name + (".gz" if config.torch_profiler_use_gzip else ""))
        self.trace = _Trace(
            profile(
                activities=self._activities(request),
                record_shapes=_pick(request, "record_shapes", config.torch_profiler_record_shapes),
                profile_memory=_pick(request, "with_memory", config.torch_profiler_with_memory),
                with_stack=_pick(request, "with_stack", config.torch_profiler_with_stack),
                with_flops=config.torch_profiler_with_flops,
                schedule=_record,  # a schedule puts each step's ProfilerStep#<n> span in the trace
            ),
            path,
            delay=request.delay_steps if request.HasField("delay_steps") else config.delay_iterations,
            left=request.max_steps if request.HasField("max_steps") else config.max_iterations,
        )
        self.last = None
        if self.trace.delay == 0:
            self._begin()
        return path

    def _activities(self, request) -> list[ProfilerActivity]:
        chosen = list(request.activities) or [ACTIVITIES[a] for a in self.config.torch_profiler_activities or ()]
        if not chosen:
            chosen = [control_pb2.PROFILE_ACTIVITY_CPU] + ([control_pb2.PROFILE_ACTIVITY_CUDA] if self.cuda else [])
        if control_pb2.PROFILE_ACTIVITY_UNSPECIFIED in chosen:
            raise fail(Reason.INVALID_REQUEST, "activities: CPU or CUDA", "activities")
        if control_pb2.PROFILE_ACTIVITY_CUDA in chosen and not self.cuda:
            raise fail(Reason.INVALID_REQUEST, "activities: CUDA on an engine that runs on the CPU", "activities")
        return [_TORCH[a] for a in dict.fromkeys(chosen)]

    def _begin(self) -> None:
        assert self.trace is not None
        self.trace.profiler.start()
        self.trace.running = True

    def step(self) -> None:
        """After a step that ran the model."""
        trace = self.trace
        if trace is None:
            return
        if not trace.running:
            trace.delay -= 1
            if trace.delay <= 0:
                self._begin()
            return
        trace.profiler.step()
        trace.steps += 1
        if trace.left and trace.steps >= trace.left:
            self.last = self._end()

    def stop(self) -> tuple[str, int]:
        """The trace written and its steps: the running one's, or the last one that ended by itself."""
        if self.trace is None:
            if self.last is None:
                raise fail(Reason.PROFILER_STATE, "no trace is running: StartProfile begins one")
            last, self.last = self.last, None
            return last
        return self._end()

    def _end(self) -> tuple[str, int]:
        trace, self.trace = self.trace, None
        assert trace is not None
        if not trace.running:  # stopped within its delay: an empty trace, still written where it was promised
            trace.profiler.start()
        trace.profiler.stop()
        trace.profiler.export_chrome_trace(trace.path)
        if self.config.torch_profiler_dump_cuda_time_total and self.cuda:
            print(trace.profiler.key_averages().table(sort_by="self_cuda_time_total", row_limit=50), flush=True)
        return trace.path, trace.steps


def _record(step: int) -> ProfilerAction:
    """Every step, from start to stop."""
    return ProfilerAction.RECORD


def _pick(request, name: str, configured: bool) -> bool:
    return getattr(request, name) if request.HasField(name) else configured
