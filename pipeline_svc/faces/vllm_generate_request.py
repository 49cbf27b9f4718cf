"""vLLM 0.33's `/inference/v1/generate` request (its scale_out GenerateRequest JSON) onto our GenerateRequest.

The two tables below are the whole mapping, vLLM's names on the left: honoured (mapped), honoured as vLLM does
(NOOP: no token this route returns changes), or refused with 400 naming it. `output_mode` "text" and "derender"
(unary) raise the tokens answer through derender (vllm_generate_levels.py). A key vLLM does
not know is refused too (vLLM ignores it). Values are checked by the engine's own rules, which name the same paths.

Render's answers (`/v1/chat/completions/render`, `/v1/completions/render`) come here unchanged. `scaleout` is the
block our render adds; its `generate_request` lends what only render builds: the compiled `structured_outputs` (with
the reasoning tags; the client's must be the same constraint), `bad_words` as token ids, `thinking_token_budget`'s
reasoning tags, the tokenizer fingerprint and prefix hash. Without it, `bad_words` and `structured_outputs` are
compiled by render for these token ids (vllm_generate.py), and `thinking_token_budget` is refused.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from google.protobuf import json_format

from pipeline_svc.faces.rl_json import only, typed
from pipeline_svc.faces.vllm_generate_levels import check_level
from scaleout.v1 import common_pb2, engine_pb2
from scaleout_common.errors import clip
from scaleout_common.reasons import Reason, fail

ID_PREFIX = "generate-tokens-"  # vLLM's engine id for a generate request: what its answer and abort_requests name
NOOP = "noop"  # accepted: vLLM reads it at other output modes or for its own bookkeeping; no token changes
REFUSE = "refuse"  # (REFUSE, default, why): refused when set to anything but its default (a tuple: any of them)

TOP = {
    "request_id": "mapped",
    "token_ids": "mapped",
    "token_offsets": NOOP,  # render's char offsets of the prompt; vLLM's generate reads none of them
    "features": (REFUSE, None, "multimodal features: the served models are text-only"),
    "content_parts": (REFUSE, None, "multimodal parts: the served models are text-only"),
    "sampling_params": "mapped",
    "model": "mapped",  # a served name, or a LoRA adapter's (-> lora_name), else 404 as vLLM's _check_model
    "reasoning_ended": "mapped",  # true: the constraint applies from the first token; else render's reasoning
    # parser reads the prompt (scaleout's block, or asked here), as vLLM's engine-side parser does
    "reasoning_parser_kwargs": NOOP,  # the template kwargs for vLLM's engine-side reasoning parser: here render's
    # parser reads the prompt as rendered, those kwargs applied
    "return_token_ids": "mapped",
    "output_mode": "mapped",  # "text" and "derender" (unary): derender raises the answer (vllm_generate_levels.py)
    "parse_context": "mapped",  # read only at output_mode "derender" (vLLM: "ignored at other levels")
    "stream": "mapped",
    "stream_options": "mapped",
    "cache_salt": "mapped",
    "priority": "mapped",
    "kv_transfer_params": "mapped",
    "ec_transfer_params": (REFUSE, None, "encoder-cache transfer: the served models have no encoder"),
    "scaleout": "mapped",
}

# sampling_params: vLLM's SamplingParams -> ours. Mapped knobs keep their names (n moves to GenerateRequest.n).
SAMPLING = {
    **dict.fromkeys(
        ("presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "min_p"), "float"
    ),
    # logprobs, prompt_logprobs: -1 (the whole vocabulary) passes on; the engine resolves it as vLLM's SamplingParams
    **dict.fromkeys(("seed", "max_tokens", "min_tokens", "logprobs", "prompt_logprobs", "stream_interval"), "int"),
    "n": "int",  # -> GenerateRequest.n, as stream_interval
    "top_k": "int",  # -1 (vLLM's "no cut") is our 0
    "stop": "mapped",  # matched by the engine on its own detokenized output
    "stop_token_ids": "mapped",
    "ignore_eos": "mapped",
    "skip_special_tokens": "mapped",  # -> stop_keep_special_tokens: the text stop strings are matched in
    "logit_bias": "mapped",
    "allowed_token_ids": "mapped",
    "logprob_token_ids": "mapped",  # each token's alternatives; logprobs, if set, must count them (vLLM's rule)
    "structured_outputs": "mapped",
    "bad_words": "mapped",
    "thinking_token_budget": "mapped",
    "detokenize": "mapped",  # false: no text, so no stop strings (vLLM's rule); token ids are the same
    "include_stop_str_in_output": NOOP,  # text only: token_ids keep the stop string's tokens either way
    "spaces_between_special_tokens": "mapped",  # false refused with stop strings (text they are matched in)
    "output_kind": NOOP,  # vLLM's server sets it from `stream`
    "skip_clone": NOOP,  # vLLM's copy avoidance
    "output_text_buffer_length": NOOP,  # vLLM's text streaming buffer
    "flat_logprobs": NOOP,  # vLLM's in-memory layout of logprobs; the JSON is the same
    "skip_reading_prefix_cache": NOOP,  # prompt logprobs here are exact whatever the prefix cache holds
    "watermarking": (REFUSE, None, "watermarking is not served"),
    "prompt_logprob_token_ids": "mapped",  # rows of ids scored at prompt positions (unary only, as vLLM's)
    "prompt_logprob_start": "mapped",  # the first row they score
    "extra_args": (REFUSE, (None, {}), "no engine plug-in reads extra_args"),  # {}: vLLM's Responses render
    "repetition_detection": (REFUSE, None, "repetition detection is not served"),
    "routed_experts_prompt_start": (REFUSE, 0, "expert routing is not returned"),
    "trace_decode_token_ids": (REFUSE, None, "decode tracing is not served"),
}
STRUCTURED = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
STRUCTURED_FLAGS = ("disable_any_whitespace", "disable_additional_properties", "whitespace_pattern")


@dataclass
class VllmGenerate:
    typed: engine_pb2.GenerateRequest
    stream: bool
    include_usage: bool
    continuous_usage: bool
    return_token_ids: bool
    model: str | None
    asks: dict  # what render must compile for these token ids: bad_words, structured_outputs (vLLM's forms)
    reasoning_ended: bool  # the constraint applies from the first token
    output_mode: str = "tokens"  # vLLM's answer level (vllm_generate_levels.py)
    body: dict | None = None  # the client's JSON, read again at the text and derender levels


def _refused(body: dict, table: dict, where: str = "") -> None:
    only(body, table, where)
    for name, rule in table.items():
        if not isinstance(rule, tuple):
            continue
        allowed = rule[1] if isinstance(rule[1], tuple) else (rule[1],)
        if body.get(name, allowed[0]) not in allowed:
            path = f"{where}.{name}" if where else name
            why = f"{path} is not supported here (only {' or '.join(map(json.dumps, allowed))}): {rule[2]}"
            raise fail(Reason.UNSUPPORTED_FIELD, why, path)


def _int(value, field: str, bits: int = 32) -> int:
    """An integer that fits the typed field (int32, or int64 for seed)."""
    if not isinstance(value, int) or isinstance(value, bool) or not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise fail(Reason.INVALID_REQUEST, f"{field} must be an integer of {bits} bits", field)
    return value


def token_ids(value, field: str) -> list[int]:
    """A list of token ids (int32, none negative)."""
    if not isinstance(value, list):
        raise fail(Reason.INVALID_REQUEST, f"{field} must be a list of integers", field)
    if any(_int(t, field) < 0 for t in value):
        raise fail(Reason.INVALID_REQUEST, f"{field} must not contain negative values", field)
    return value


def parse(body: dict) -> VllmGenerate:
    _refused(body, TOP)
    if "token_ids" not in body or not token_ids(body["token_ids"], "token_ids"):
        raise fail(Reason.INVALID_REQUEST, "token_ids must hold at least one token id", "token_ids")
    if not isinstance(body.get("sampling_params"), dict):
        raise fail(Reason.INVALID_REQUEST, "sampling_params must be an object", "sampling_params")
    base = _base(body.get("scaleout"))
    request = engine_pb2.GenerateRequest(
        request_id=ID_PREFIX + typed(body.get("request_id") or uuid.uuid4().hex, str, "request_id"),
        token_ids=body["token_ids"],
        model=typed(body.get("model") or "", str, "model"),
        tokenizer_fingerprint=base.tokenizer_fingerprint,
        prefix_hash=base.prefix_hash,
        cache_salt=typed(body.get("cache_salt") or "", str, "cache_salt"),
        priority=_int(body.get("priority", 0), "priority"),
    )
    if body.get("kv_transfer_params") is not None:
        json_format.ParseDict(typed(body["kv_transfer_params"], dict, "kv_transfer_params"), request.kv_transfer_params)
    asks: dict = {}
    _sampling(body["sampling_params"], base, request, asks)
    reasoning_ended = _flag(body, "reasoning_ended", False)
    if reasoning_ended and request.sampling_params.HasField("structured_outputs"):
        request.sampling_params.structured_outputs.reasoning_ended = True
    options = body.get("stream_options") or {}
    only(typed(options, dict, "stream_options"), ("include_usage", "continuous_usage_stats"), "stream_options")
    include_usage = _flag(options, "include_usage", False, "stream_options.")
    stream = _flag(body, "stream", False)
    if stream and request.sampling_params.prompt_logprob_token_ids:  # vLLM's: its stream chunks have no field for them
        field = "sampling_params.prompt_logprob_token_ids"
        raise fail(Reason.UNSUPPORTED_FIELD, "prompt_logprob_token_ids are not available when stream=true.", field)
    detokenize = body["sampling_params"].get("detokenize") is not False
    mode = check_level(body, stream, detokenize)
    return VllmGenerate(
        typed=request,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=include_usage and _flag(options, "continuous_usage_stats", False, "stream_options."),
        return_token_ids=_flag(body, "return_token_ids", False),
        model=body.get("model"),
        asks=asks,
        reasoning_ended=reasoning_ended,
        output_mode=mode,
        body=body,
    )


def _flag(body: dict, name: str, default: bool, where: str = "") -> bool:
    """A boolean field; null is its default, as vLLM's optional flags."""
    value = body.get(name)
    return default if value is None else typed(value, bool, where + name)


def _base(block) -> engine_pb2.GenerateRequest:
    """Render's `scaleout` block: its typed GenerateRequest (less token ids), for what only render can build."""
    base = engine_pb2.GenerateRequest()
    if block is None:
        return base
    only(typed(block, dict, "scaleout"), ("generate_request", "derender_context", "prompt_text"), "scaleout")
    field = "scaleout.generate_request"
    try:
        json_format.ParseDict(typed(block.get("generate_request") or {}, dict, field), base)
    except (json_format.ParseError, TypeError, ValueError) as error:
        raise fail(Reason.INVALID_REQUEST, f"{field} is not our GenerateRequest: {clip(str(error))}", field) from None
    return base


def _sampling(params: dict, base: engine_pb2.GenerateRequest, request, asks: dict) -> None:
    _refused(params, SAMPLING, "sampling_params")
    out = request.sampling_params
    for name, kind in SAMPLING.items():
        if kind not in ("float", "int") or params.get(name) is None:
            continue
        value, field = params[name], f"sampling_params.{name}"
        if kind == "int":
            value = _int(value, field, 64 if name == "seed" else 32)
        elif not isinstance(value, (int, float)) or isinstance(value, bool):
            raise fail(Reason.INVALID_REQUEST, f"{field} must be a number", field)
        if name in ("n", "stream_interval"):  # GenerateRequest's own
            setattr(request, name, value)
        elif name == "top_k":
            out.top_k = 0 if value == -1 else value
        else:
            setattr(out, name, value)
    stop = params.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise fail(Reason.INVALID_REQUEST, "sampling_params.stop must be a string or strings", "sampling_params.stop")
    out.stop.extend(stop)
    out.stop_token_ids.extend(token_ids(params.get("stop_token_ids") or [], "sampling_params.stop_token_ids"))
    out.allowed_token_ids.extend(token_ids(params.get("allowed_token_ids") or [], "sampling_params.allowed_token_ids"))
    _named(params, out)
    _scored_rows(params, out)
    out.ignore_eos = _flag(params, "ignore_eos", False, "sampling_params.")
    out.stop_keep_special_tokens = not _flag(params, "skip_special_tokens", True, "sampling_params.")
    for key, bias in typed(params.get("logit_bias") or {}, dict, "sampling_params.logit_bias").items():
        if (
            not str(key).lstrip("-").isdigit()
            or abs(int(key)) >= 2**31
            or not isinstance(bias, (int, float))
            or isinstance(bias, bool)
        ):
            field = f"sampling_params.logit_bias.{str(key)[:20]}"
            raise fail(Reason.INVALID_REQUEST, "logit_bias maps token ids to numbers", field)
        out.logit_bias[int(key)] = bias
    if out.stop and not _flag(params, "detokenize", True, "sampling_params."):
        raise fail(Reason.UNSUPPORTED_FIELD, "stop strings need detokenize true", "sampling_params.detokenize")
    if out.stop and not _flag(params, "spaces_between_special_tokens", True, "sampling_params."):
        field = "sampling_params.spaces_between_special_tokens"
        raise fail(Reason.UNSUPPORTED_FIELD, f"{field} false is not supported with stop strings", field)
    _from_render(params, base, out, asks)


def _named(params: dict, out: common_pb2.SamplingParams) -> None:
    """vLLM's logprob_token_ids: logprobs of these ids at each token; `logprobs`, when set, must be their count."""
    field = "sampling_params.logprob_token_ids"
    named = token_ids(params.get("logprob_token_ids") or [], field)
    if not named:
        return
    if out.HasField("logprobs") and out.logprobs != len(named):
        raise fail(
            Reason.INVALID_SAMPLING_PARAM,
            f"logprobs must equal len(logprob_token_ids) when both are set ({out.logprobs} != {len(named)})",
            field,
        )
    out.logprob_token_ids.extend(dict.fromkeys(named))
    out.logprobs = 0  # set: our engine gives the named ids in place of any top-k


def _scored_rows(params: dict, out: common_pb2.SamplingParams) -> None:
    """vLLM's prompt_logprob_token_ids (a non-empty [num_rows, num_ids] array, -1 padding) and prompt_logprob_start;
    the engine checks them against the prompt (scaleout_common/prompt_logprob_rules.py)."""
    field = "sampling_params.prompt_logprob_token_ids"
    rows = params.get("prompt_logprob_token_ids")
    if rows is not None:
        if not isinstance(rows, list) or not rows or not all(isinstance(row, list) for row in rows):
            why = "prompt_logprob_token_ids must be a non-empty integer array of shape [num_rows, num_ids]."
            raise fail(Reason.INVALID_SAMPLING_PARAM, why, field)
        for row in rows:
            out.prompt_logprob_token_ids.add(token_ids=[_int(token, field) for token in row])
    if params.get("prompt_logprob_start") is not None:
        out.prompt_logprob_start = _int(params["prompt_logprob_start"], "sampling_params.prompt_logprob_start")


def _from_render(params: dict, base: engine_pb2.GenerateRequest, out, asks: dict) -> None:
    """bad_words, thinking_token_budget and structured_outputs: render's compiled forms, from its block, else (the
    first and last) asked of render for these token ids (`asks`, vllm_generate.py); a budget needs the block."""
    given = base.sampling_params
    if words := typed(params.get("bad_words") or [], list, "sampling_params.bad_words"):
        if not all(isinstance(word, str) for word in words):
            raise fail(Reason.INVALID_REQUEST, "bad_words must be strings", "sampling_params.bad_words")
        if given.bad_words:
            out.bad_words.extend(given.bad_words)
        else:
            asks["bad_words"] = words
    budget = params.get("thinking_token_budget")
    if budget not in (None, -1):
        if not given.HasField("thinking_budget"):
            field = "sampling_params.thinking_token_budget"
            raise fail(Reason.UNSUPPORTED_FIELD, f"{field} needs render's `scaleout` block (the reasoning tags)", field)
        out.thinking_budget.CopyFrom(given.thinking_budget)
        out.thinking_budget.max_tokens = _int(budget, "sampling_params.thinking_token_budget")
    spec = params.get("structured_outputs")
    if spec is None:
        return
    field = "sampling_params.structured_outputs"
    asked = _constraint(typed(spec, dict, field))
    if not given.HasField("structured_outputs"):
        asks["structured_outputs"] = {key: value for key, value in spec.items() if not key.startswith("_")}
    elif _same(asked, given.structured_outputs):
        out.structured_outputs.CopyFrom(given.structured_outputs)
    else:
        raise fail(Reason.INVALID_REQUEST, f"{field} differs from the one render compiled (scaleout)", field)


def _same(asked: common_pb2.StructuredOutputs, compiled: common_pb2.StructuredOutputs) -> bool:
    """The client's constraint is render's, its reasoning tags aside (a JSON schema compared as JSON)."""
    kind = asked.WhichOneof("constraint")
    if kind != compiled.WhichOneof("constraint"):
        return False
    if kind == "json_schema":
        return json.loads(asked.json_schema) == json.loads(compiled.json_schema)
    return getattr(asked, kind) == getattr(compiled, kind)


def _constraint(spec: dict) -> common_pb2.StructuredOutputs:
    """vLLM's StructuredOutputsParams (one constraint, its JSON flags; render prints `_backend` too) as ours."""
    field = "sampling_params.structured_outputs"
    only(spec, (*STRUCTURED, *STRUCTURED_FLAGS, "_backend", "_backend_was_auto"), field)
    kinds = [name for name in STRUCTURED if spec.get(name) not in (None, False)]
    if len(kinds) != 1:
        raise fail(Reason.INVALID_REQUEST, f"{field} must set exactly one of {list(STRUCTURED)}", field)
    kind, value = kinds[0], spec[kinds[0]]
    out = common_pb2.StructuredOutputs(
        disable_any_whitespace=bool(spec.get("disable_any_whitespace")),
        disable_additional_properties=bool(spec.get("disable_additional_properties")),
        whitespace_pattern=spec.get("whitespace_pattern") or "",
    )
    if kind == "json":
        try:
            out.json_schema = json.dumps(json.loads(value) if isinstance(value, str) else typed(value, dict, field))
        except ValueError:
            raise fail(Reason.INVALID_REQUEST, f"{field}.json is not a JSON schema", f"{field}.json") from None
    elif kind == "choice":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(Reason.INVALID_REQUEST, f"{field}.choice must be a list of strings", f"{field}.choice")
        out.choice.values.extend(value)
    elif kind == "json_object":
        out.json_object = True
    else:
        setattr(out, kind, typed(value, str, f"{field}.{kind}"))
    return out
