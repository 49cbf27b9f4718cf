"""vLLM's `kv_transfer_params` (its NIXL connector's shape, as vllm-router and llm-d send and copy them) onto our
KvTransfer and back. The whole mapping:

  vLLM key                       ours                                   on the way in
  do_remote_decode: true         KvTransfer.hand_off                    the prefill step
  do_remote_prefill: true        KvTransfer.pull (a KvHandoff)          the decode step; needs the remote_* below
  remote_engine_id               KvHandoff.engine_id
  remote_host, remote_port       KvHandoff.host, .port
  remote_request_id              KvHandoff.handoff_id
  remote_block_ids               KvHandoff.block_ids                    a list of ints (or one group of them)
  remote_num_tokens              KvHandoff.num_tokens
  tp_size, pp_size, dcp_size     KvHandoff.tp_size / -                  1 or null (our engines run one rank)
  remote_blocks_expiry_time,     -                                      refused: NIXL connector state that only
  remote_registration_generation, transfer_mode                         a vLLM prefill engine writes; its blocks
                                                                        cannot be pulled from here

A key not in this table, a value of the wrong type, both steps at once: INVALID_KV_TRANSFER naming it. Null is
absent (vLLM's routers send the remote_* keys as null on the prefill request). The prefill answer goes back in
the shape vLLM's connector answers (`answer`), which its routers copy verbatim into the decode request.
"""

from __future__ import annotations

from google.protobuf import json_format, struct_pb2

from scaleout.v1 import kv_transfer_pb2
from scaleout_common.reasons import Reason, fail

FIELD = "kv_transfer_params"
_HANDOFF = {  # vLLM key -> KvHandoff field, and the JSON type it must have
    "remote_engine_id": ("engine_id", str),
    "remote_host": ("host", str),
    "remote_port": ("port", int),
    "remote_request_id": ("handoff_id", str),
    "remote_num_tokens": ("num_tokens", int),
    "tp_size": ("tp_size", int),
}
_ONE_RANK = ("pp_size", "dcp_size")
_NIXL_ONLY = ("remote_blocks_expiry_time", "remote_registration_generation", "transfer_mode")
_STEPS = ("do_remote_decode", "do_remote_prefill")


def _bad(key: str, why: str):
    return fail(Reason.INVALID_KV_TRANSFER, f"{FIELD}.{key} {why}", f"{FIELD}.{key}")


def _int(key: str, value) -> int:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != int(value):
        raise _bad(key, "must be an integer")
    return int(value)


def _block_ids(value) -> list[int]:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]  # vLLM's one KV-cache group
    if not isinstance(value, list):
        raise _bad("remote_block_ids", "must be a list of block ids")
    return [_int("remote_block_ids", v) for v in value]


def parse(params: struct_pb2.Struct) -> kv_transfer_pb2.KvTransfer | None:
    """The step vLLM's params ask for (None: neither)."""
    given = {k: v for k, v in json_format.MessageToDict(params).items() if v is not None}
    known = {*_HANDOFF, *_ONE_RANK, *_STEPS, "remote_block_ids"}
    for key in given:
        if key in _NIXL_ONLY:
            raise _bad(key, "is vLLM's NIXL connector state: a handoff from a vLLM engine cannot be pulled by this one")
        if key not in known:
            raise _bad(key, f"is not a key of vLLM's kv_transfer_params this engine knows ({', '.join(sorted(known))})")
    for key in _STEPS:
        if not isinstance(given.get(key, False), bool):
            raise _bad(key, "must be true or false")
    for key in _ONE_RANK:
        if key in given and _int(key, given[key]) != 1:
            raise _bad(key, "must be 1: this engine runs one rank")
    decode, prefill = given.get("do_remote_decode", False), given.get("do_remote_prefill", False)
    if decode and prefill:
        raise _bad("do_remote_prefill", "and do_remote_decode are both true: a request runs one step")
    if decode:
        return kv_transfer_pb2.KvTransfer(hand_off=True)
    if not prefill:
        return None
    pull = kv_transfer_pb2.KvHandoff(tp_size=1)
    for key, (name, kind) in _HANDOFF.items():
        if key in given:
            value = _int(key, given[key]) if kind is int else given[key]
            if kind is str and not isinstance(value, str):
                raise _bad(key, "must be a string")
            setattr(pull, name, value)
        elif key not in ("tp_size", "remote_num_tokens"):
            raise _bad(key, "is needed with do_remote_prefill")
    if "remote_block_ids" not in given:
        raise _bad("remote_block_ids", "is needed with do_remote_prefill")
    pull.block_ids.extend(_block_ids(given["remote_block_ids"]))
    if pull.tp_size != 1:
        raise _bad("tp_size", "must be 1: this engine runs one rank")
    return kv_transfer_pb2.KvTransfer(pull=pull)


def answer(handoff: kv_transfer_pb2.KvHandoff) -> struct_pb2.Struct:
    """A prefill answer's handoff as vLLM's connector writes it (request_finished in nixl/pull_scheduler.py)."""
    out = struct_pb2.Struct()
    out.update(
        {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_block_ids": list(handoff.block_ids),
            "remote_engine_id": handoff.engine_id,
            "remote_request_id": handoff.handoff_id,
            "remote_host": handoff.host,
            "remote_port": handoff.port,
            "tp_size": handoff.tp_size,
            "remote_num_tokens": handoff.num_tokens,
        }
    )
    return out
