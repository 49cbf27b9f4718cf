"""`/start_profile` and `/stop_profile` as vLLM and SGLang serve them (the same paths, each its own body), a face over
EngineControlService.StartProfile / StopProfile applied to every engine replica; admin-scoped. Mixed into the vLLM
face's servicer (pipeline_svc/faces/vllm_server.py).

The whole mapping of the start body (vLLM 0.33's StartProfileRequest; SGLang's ProfileReq, as its bench_serving
`--profile` sends it, numbers as strings too):

  key                       ours (StartProfileRequest)   note
  profile_prefix            prefix                       both
  delay_iterations          delay_steps                  vLLM
  max_iterations            max_steps                    vLLM
  profiler_kwargs           -                            vLLM: refused unless empty (what a trace records is the
                                                         engine's --profiler-config)
  output_dir                directory                    SGLang: on each engine's host, made if missing
  start_step                delay_steps                  SGLang: steps from now (ours has no global step count)
  num_steps                 max_steps                    SGLang
  activities                activities                   SGLang: CPU, GPU (CUDA), MEM (with_memory); others refused
  with_stack, record_shapes with_stack, record_shapes   SGLang
  profile_by_stage, merge_profiles, detailed_annotations false only (one trace per replica, of every step)
  profile_stages, profile_id  null only

Any other key is refused by name. Both answers are text, SGLang's words; vLLM's clients read the status only.
"""

from __future__ import annotations

from google.api import httpbody_pb2

from pipeline_svc.faces.rl_json import only
from pipeline_svc.fleet_service import FleetOperations
from scaleout.v1 import control_pb2 as C
from scaleout_common.errors import quote
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

TIMEOUT_S = 120.0  # a stop writes each replica's trace
STEPS = {"delay_iterations": "delay_steps", "max_iterations": "max_steps", "start_step": "delay_steps"}
STEPS |= {"num_steps": "max_steps"}
FLAGS = {"with_stack": "with_stack", "record_shapes": "record_shapes"}
ACTIVITIES = {"CPU": C.PROFILE_ACTIVITY_CPU, "GPU": C.PROFILE_ACTIVITY_CUDA, "CUDA": C.PROFILE_ACTIVITY_CUDA}
OFF_ONLY = ("profile_by_stage", "merge_profiles", "detailed_annotations", "profile_stages", "profile_id")
KEYS = {"profile_prefix", "profiler_kwargs", "output_dir", "activities", *STEPS, *FLAGS, *OFF_ONLY}


def _text(words: str) -> httpbody_pb2.HttpBody:
    return httpbody_pb2.HttpBody(content_type="text/plain; charset=utf-8", data=words.encode())


def _count(value, field: str) -> int:
    """A step count: an integer, or its decimal string (SGLang's bench sends `"5"`)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise fail(Reason.INVALID_REQUEST, f"{field} must be an integer >= 0", field)
    return value


def start_request(body: dict) -> C.StartProfileRequest:
    """StartProfileRequest from either project's body (nulls are absent)."""
    body = {key: value for key, value in body.items() if value is not None}
    only(body, KEYS)
    out = C.StartProfileRequest()
    for key, value in body.items():
        if key in STEPS:
            setattr(out, STEPS[key], _count(value, key))
        elif key in FLAGS:
            if not isinstance(value, bool):
                raise fail(Reason.INVALID_REQUEST, f"{key} must be a boolean", key)
            setattr(out, FLAGS[key], value)
        elif key in OFF_ONLY and value not in (False, [], ""):
            raise fail(Reason.UNSUPPORTED_FIELD, f"{key} is not supported: one trace per replica, of every step", key)
        elif key in ("profile_prefix", "output_dir"):
            if not isinstance(value, str):
                raise fail(Reason.INVALID_REQUEST, f"{key} must be a string", key)
            setattr(out, "prefix" if key == "profile_prefix" else "directory", value)
        elif key == "profiler_kwargs" and value != {}:
            raise fail(
                Reason.UNSUPPORTED_FIELD, "profiler_kwargs is not supported: the engine's --profiler-config is", key
            )
        elif key == "activities":
            _activities(value, out)
    return out


def _activities(value, out: C.StartProfileRequest) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(Reason.INVALID_REQUEST, "activities must be a list of strings", "activities")
    for name in value:
        if name == "MEM":
            out.with_memory = True
        elif name in ACTIVITIES:
            out.activities.append(ACTIVITIES[name])
        else:
            raise fail(
                Reason.UNSUPPORTED_FIELD, f"activity {quote(name)} is not supported (CPU, GPU, MEM)", "activities"
            )


class ProfileRoutes:
    fleet: FleetOperations

    async def StartProfile(self, request, context):
        start = start_request(load_object(request.data) if request.data.strip() else {})
        await self.fleet.control_all(context, "StartProfile", start, TIMEOUT_S)
        return _text("Start profiling.\n")

    async def StopProfile(self, request, context):
        only(load_object(request.data) if request.data.strip() else {}, ())
        await self.fleet.control_all(context, "StopProfile", C.StopProfileRequest(), TIMEOUT_S)
        return _text("Stop profiling. This will take some time.\n")
