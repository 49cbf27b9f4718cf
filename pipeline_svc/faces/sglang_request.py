"""SGLang's `/generate` body (its GenerateReqInput and SamplingParams) -> one typed completion request per prompt.

Every field of SGLang's GenerateReqInput (0.5.23, io_struct.py) is in exactly one table below: honoured
(`TOP_LEVEL`, `SAMPLING`: mapped onto RenderCompletionRequest, so render resolves, bounds and tokenizes it as it
does for `/v1/completions`), or taken only at SGLang's own default, which changes nothing (`DEFAULT_ONLY`: any
other value is UNSUPPORTED_FIELD naming it, with the reason). A key SGLang does not have is refused too.

The batch rules are SGLang's normalize_batch_and_arguments: `text` a string or `input_ids` a list of ids is one
prompt (the answer is one object), a list of them a batch (the answer a list); `n` > 1 (the same in every
sampling_params) makes a batch of prompts x n answers, prompt-major. `sampling_params`, `rid`, `return_logprob`,
`logprob_start_len` and `top_logprobs_num` may be one value for all or a list with one per prompt (not with n > 1
for the logprob ones, as SGLang). A string `rid` names a batch's answers `<rid>_<i>`.

`max_new_tokens: 0` is SGLang's prefill-only request (a prompt's logprobs, scoring): the engine generates at
least one token, so the prompt is sent with max_tokens 1 and its answers drop that token (`prefill_only`):
no text, no output ids or logprobs, finish_reason `length` 0, as SGLang answers; `min_new_tokens` > 0 with it
is a 400.

Differences from SGLang, each a 400 rather than a guess: `text` and `input_ids` together (SGLang reads `text`),
an empty batch, `sampling_params` given as a list whose length is not the batch's, and more than 128 answers
(prompts x n, the completion route's TOO_MANY_CHOICES bound).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from scaleout.v1 import render_pb2
from scaleout_common.errors import QUOTE_CHARS, ServiceError, clip
from scaleout_common.json_body import load_object
from scaleout_common.openai_body_rules import parse_typed
from scaleout_common.reasons import Reason, fail
from scaleout_common.sampling_rules import check_choices

MAX_NEW_TOKENS_DEFAULT = 128  # SGLang's SamplingParams.max_new_tokens; null: up to the context, as SGLang


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _strs(v) -> bool:
    return isinstance(v, str) or (isinstance(v, list) and all(isinstance(s, str) for s in v))


def _ids(v) -> bool:
    return isinstance(v, list) and all(_int(t) for t in v)


def _bias(v) -> bool:
    return isinstance(v, dict) and all(k.lstrip("-").isdigit() and _num(b) for k, b in v.items())


# SGLang sampling_params key -> (its JSON type, in words; the RenderCompletionRequest field(s) it sets).
SAMPLING: dict[str, tuple[Callable, str, Callable[[object], dict]]] = {
    "max_new_tokens": (_int, "an integer", lambda v: {"max_tokens": v}),
    "stop": (_strs, "a string or strings", lambda v: {"stop": [v] if isinstance(v, str) else v}),
    "stop_token_ids": (_ids, "token ids", lambda v: {"stop_token_ids": v}),
    "stop_regex": (_strs, "a string or strings", lambda v: {"stop_regex": [v] if isinstance(v, str) else v}),
    "temperature": (_num, "a number", lambda v: {"temperature": v}),
    "top_p": (_num, "a number", lambda v: {"top_p": v}),
    "top_k": (_int, "an integer", lambda v: {"top_k": 0 if v == -1 else v}),  # SGLang's -1: the whole vocabulary
    "min_p": (_num, "a number", lambda v: {"min_p": v}),
    "frequency_penalty": (_num, "a number", lambda v: {"frequency_penalty": v}),
    "presence_penalty": (_num, "a number", lambda v: {"presence_penalty": v}),
    "repetition_penalty": (_num, "a number", lambda v: {"repetition_penalty": v}),
    "min_new_tokens": (_int, "an integer", lambda v: {"min_tokens": v}),
    "n": (_int, "an integer", lambda v: {"n": v}),
    "json_schema": (lambda v: isinstance(v, str), "a string", lambda v: {"json_schema": v}),
    "regex": (lambda v: isinstance(v, str), "a string", lambda v: {"regex": v}),
    "ebnf": (lambda v: isinstance(v, str), "a string", lambda v: {"ebnf": v}),
    "structural_tag": (
        lambda v: isinstance(v, str),
        "a string",
        lambda v: {"structured_outputs": {"structural_tag": v}},
    ),
    "ignore_eos": (lambda v: isinstance(v, bool), "a boolean", lambda v: {"ignore_eos": v}),
    "skip_special_tokens": (lambda v: isinstance(v, bool), "a boolean", lambda v: {"skip_special_tokens": v}),
    "spaces_between_special_tokens": (
        lambda v: isinstance(v, bool),
        "a boolean",
        lambda v: {"spaces_between_special_tokens": v},
    ),
    "no_stop_trim": (lambda v: isinstance(v, bool), "a boolean", lambda v: {"no_stop_trim": v}),
    "stream_interval": (_int, "an integer", lambda v: {"stream_interval": v}),
    "logit_bias": (_bias, "an object of token ids to numbers", lambda v: {"logit_bias": v}),
    "sampling_seed": (_int, "an integer", lambda v: {"seed": v}),
}
# SGLang sampling_params keys taken only at the value that changes nothing: (those values, why others are refused).
SAMPLING_DEFAULT_ONLY = {
    "beam_width": ((None, 1), "beam search is not served: sample with `n`"),
    "custom_params": ((None, {}), "is for custom logit processors, which are not served"),
    "watermark": ((None,), "watermarking is not served"),
}

# A typed completion field -> the SGLang field it came from (to name it in errors).
RENDER_FIELDS = {
    **{next(iter(mapped(1))): f"sampling_params.{name}" for name, (_, _, mapped) in SAMPLING.items()},
    "logprobs": "top_logprobs_num",
    "prompt_logprobs": "top_logprobs_num",
    "prompt": "text",
    "prompts": "text",
    "prompt_token_ids": "input_ids",
}

# Top-level fields read by the route itself (the prompts, the batch, the answer's shape).
TOP_LEVEL = (
    "text",
    "input_ids",
    "sampling_params",
    "rid",
    "stream",
    "return_logprob",
    "logprob_start_len",
    "top_logprobs_num",
    "return_text_in_logprobs",
    "return_prompt_token_ids",
    "priority",
    "cache_salt",
    "model",
)
# SMG's GenerateRequest always sends `model`, "unknown" when its client named none: that names no model. Any
# other name must be the served model's (render's MODEL_NOT_FOUND otherwise); SGLang's server, which has one
# model, reads no `model` at all.
UNNAMED_MODEL = "unknown"
OFF = (None, False)
NOTHING = (None, [], {}, "")
# Top-level fields taken only at SGLang's default: (the values that change nothing, why others are refused).
MULTIMODAL = (
    *("input_embeds", "image_data", "video_data", "audio_data", "mm_hashes", "mm_content_hashes", "modalities"),
    *("video_config", "images_config", "mm_processor_kwargs", "positional_embed_overrides", "use_audio_in_video"),
    *("max_dynamic_patch", "min_dynamic_patch", "image_max_dynamic_patch", "video_max_dynamic_patch"),
    *("need_wait_for_mm_inputs", "num_items_assigned", "encoder_urls"),
)
SGLANG_PD = ("bootstrap_host", "bootstrap_port", "bootstrap_room", "bootstrap_pair_key", "decode_tp_size")
DEFAULT_ONLY: dict[str, tuple[tuple, str]] = {
    **dict.fromkeys(MULTIMODAL, ((*NOTHING, False), "is not served: the model takes text only")),
    **dict.fromkeys(SGLANG_PD, (NOTHING, "is SGLang's P/D handoff, not served (vLLM's kv_transfer_params are)")),
    "watermark": ((None,), "watermarking is not served"),
    "token_ids_logprob": (NOTHING, "is not served: ask for top_logprobs_num"),
    "return_sampling_mask": (OFF, "is not served"),
    "sampling_logprobs_mode": ((None,), "is not served"),
    "return_flat_raw_top_logprobs": (OFF, "is not served: top logprobs come nested"),
    "return_flat_raw_output_top_logprobs": (OFF, "is not served: top logprobs come nested"),
    "return_flat_raw_top_logprobs_b64": (OFF, "is not served: top logprobs come nested"),
    "return_hidden_states": (OFF, "is not served: hidden states never leave the engine"),
    "return_routed_experts": (OFF, "is not served: routed experts never leave the engine"),
    "routed_experts_start_len": ((None, 0), "is not served: routed experts never leave the engine"),
    "return_indexer_topk": (OFF, "is not served"),
    "return_entropy": (OFF, "is not served"),
    "return_bytes": (OFF, "is not served"),
    "session_id": ((None,), "is not served: sessions are not kept"),
    "session_params": (NOTHING, "is not served: sessions are not kept"),
    "lora_path": (NOTHING, "is not served: no LoRA adapters are loaded"),
    "lora_id": (NOTHING, "is not served: no LoRA adapters are loaded"),
    "custom_logit_processor": (NOTHING, "is not served: custom logit processors cannot run here"),
    "disagg_prefill_dp_rank": ((None,), "is SGLang's P/D handoff, not served"),
    # The stack is one server of dp_size 1 (/get_server_info): rank 0 is the only one (SMG's dp-aware mode
    # sends `data_parallel_rank`).
    "routed_dp_rank": ((None, 0), "names a rank this server of dp_size 1 does not have"),
    "data_parallel_rank": ((None, 0), "names a rank this server of dp_size 1 does not have"),
    "routing_key": ((None,), "is not served: the gateway routes on the prompt's prefix"),
    "conversation_id": ((None,), "is not served"),
    "extra_key": (NOTHING, "is not served: `cache_salt` isolates a prefix cache"),
    "kv_hints": (NOTHING, "is not served"),
    "multi_item_delimiter_indices": (NOTHING, "is not served: multi-item scoring is not"),
    "token_indices_to_pool": (NOTHING, "is not served"),
    "background": (OFF, "is not served"),
    "require_reasoning": (OFF, "is not served"),
    "max_thinking_tokens": ((None,), "is not served on /generate"),
    "custom_labels": (NOTHING, "is not served: metrics carry no client labels"),
    "external_trace_header": (NOTHING, "is not served: send W3C traceparent headers"),
    "received_time": ((None,), "is SGLang-internal"),
    "http_worker_ipc": ((None,), "is SGLang-internal"),
    "log_metrics": ((None, True), "= false is not served: every request is counted"),
    "no_logs": (OFF, "is not served"),
}


@dataclass
class Prompt:
    """One prompt of the request: its typed completion request (n choices), and what its answers show."""

    typed: render_pb2.RenderCompletionRequest
    rids: list[str]  # one per answer (n of them)
    logprob: bool
    logprob_start_len: int  # -1: no prompt logprobs
    top_logprobs_num: int
    prefill_only: bool = False  # max_new_tokens 0: the one token generated is not shown


@dataclass
class GenerateBody:
    prompts: list[Prompt]
    single: bool  # the answer is one object, not a list
    stream: bool
    text_in_logprobs: bool
    prompt_ids: bool  # return_prompt_token_ids
    data: dict  # the body as sent (to name the client's fields in an engine's error)


def unsupported(name: str, why: str) -> ServiceError:
    name = clip(name, QUOTE_CHARS)
    return fail(Reason.UNSUPPORTED_FIELD, f"`{name}` {why}", name)


def invalid(name: str, why: str) -> ServiceError:
    return fail(Reason.INVALID_REQUEST, f"`{name}` {why}", name)


def _policy(data: dict) -> None:
    for name, value in data.items():
        if name in DEFAULT_ONLY:
            values, why = DEFAULT_ONLY[name]
            if value not in values:
                raise unsupported(name, why)
        elif name not in TOP_LEVEL:
            raise unsupported(name, "is not a field of SGLang's /generate")


def _sampling(params, field: str) -> dict:
    """One SGLang sampling_params object as RenderCompletionRequest fields."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise invalid(field, "must be an object")
    out = {"max_tokens": MAX_NEW_TOKENS_DEFAULT}
    for name, value in params.items():
        path = f"{field}.{name}"
        if name in SAMPLING_DEFAULT_ONLY:
            values, why = SAMPLING_DEFAULT_ONLY[name]
            if value not in values:
                raise unsupported(path, why)
            continue
        if name not in SAMPLING:
            raise unsupported(path, "is not one of SGLang's sampling params")
        check, kind, mapped = SAMPLING[name]
        if value is None:
            out.pop("max_tokens" if name == "max_new_tokens" else name, None)  # null: SGLang's default
            continue
        if not check(value):
            raise invalid(path, f"must be {kind}")
        out.update(mapped(value))
    return out


def _prefill_only(sampling: dict, field: str) -> bool:
    """max_new_tokens 0 (SGLang's prefill-only request): sent as max_tokens 1, whose token the answer drops."""
    if sampling.get("max_tokens") != 0:
        return False
    if sampling.get("min_tokens", 0) > 0:
        raise invalid(f"{field}.min_new_tokens", "must be 0 when max_new_tokens is 0")
    sampling["max_tokens"] = 1
    return True


def _per_prompt(data: dict, name: str, count: int, n: int, default, check: Callable, kind: str) -> list:
    """A field given once for every prompt or as a list of one per prompt (SGLang's normalize_param)."""
    value = data.get(name)
    if value is None:
        return [default] * count
    if isinstance(value, list):
        if n > 1:
            raise invalid(name, "cannot be a list with n > 1")
        if len(value) != count:
            raise invalid(name, f"has {len(value)} entries for {count} prompts")
        values = value
    else:
        values = [value] * count
    if not all(check(v) for v in values):
        raise invalid(name, f"must be {kind} or a list of such")
    return values


def _prompts(data: dict) -> tuple[list[dict], bool]:
    """Each prompt as render's prompt field, and whether the request names one prompt."""
    text, ids = data.get("text"), data.get("input_ids")
    if text is not None and ids is not None:
        raise fail(Reason.CONFLICTING_OPTIONS, "give `text` or `input_ids`, not both", "input_ids")
    if text is not None:
        if isinstance(text, str):
            return [{"prompts": [text]}], True
        if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
            return [{"prompts": [t]} for t in text], False
        raise invalid("text", "must be a string or a non-empty list of strings")
    if ids is not None:
        if isinstance(ids, list) and ids and _ids(ids):
            return [{"prompt_token_ids": [{"token_ids": ids}]}], True
        if isinstance(ids, list) and ids and all(isinstance(p, list) and p and _ids(p) for p in ids):
            return [{"prompt_token_ids": [{"token_ids": p}]} for p in ids], False
        raise invalid("input_ids", "must be a non-empty list of token ids or of such lists")
    raise fail(Reason.MISSING_PROMPT, "either `text` or `input_ids` should be provided", "text")


def _rids(rid, count: int, n: int, single: bool) -> list[str]:
    """Each prompt's request id (SGLang: a string names one request, or a batch's `<rid>_<i>`); its n answers are
    `<id>_<j>` when n > 1."""
    if rid is None:
        return [uuid.uuid4().hex for _ in range(count)]
    if isinstance(rid, str):
        return [rid] if single else [f"{rid}_{i}" for i in range(count)]
    if isinstance(rid, list) and len(rid) == count and all(isinstance(r, str) for r in rid):
        return rid
    raise invalid("rid", "must be a string or a list of one string per prompt")


def _flag(data: dict, name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool) and value is not None:
        raise invalid(name, "must be a boolean")
    return bool(value)


def parse(body: bytes) -> GenerateBody:
    data = load_object(body)
    _policy(data)
    prompt_forms, single = _prompts(data)
    count = len(prompt_forms)
    raw = data.get("sampling_params")
    if isinstance(raw, list) and len(raw) != count:
        raise invalid("sampling_params", f"has {len(raw)} entries for {count} prompts")
    samplings = [
        _sampling(p, f"sampling_params[{i}]" if isinstance(raw, list) else "sampling_params")
        for i, p in enumerate(raw if isinstance(raw, list) else [raw] * count)
    ]
    ns = {s.get("n", 1) for s in samplings}
    if len(ns) > 1:
        raise invalid("sampling_params", "must ask the same n of every prompt")
    n = ns.pop()
    # prompts x n answers, bounded before anything is built for them (render bounds each prompt's n the same way)
    check_choices(count, n, "text" if data.get("text") is not None else "input_ids")
    logprob = _per_prompt(data, "return_logprob", count, n, False, lambda v: isinstance(v, bool), "a boolean")
    start = _per_prompt(data, "logprob_start_len", count, n, -1, _int, "an integer")
    top = _per_prompt(data, "top_logprobs_num", count, n, 0, _int, "an integer")
    rids = _rids(data.get("rid"), count, n, single)
    common: dict = {"return_token_ids": True}
    if data.get("priority") is not None:
        if not _int(data["priority"]):
            raise invalid("priority", "must be an integer")
        common["priority"] = data["priority"]
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise invalid("model", "must be a string")
    if model and model != UNNAMED_MODEL:
        common["model"] = model
    if data.get("cache_salt") is not None:
        if not isinstance(data["cache_salt"], str):
            raise invalid("cache_salt", "must be a string")
        common["cache_salt"] = data["cache_salt"]
    prompts = []
    for i, (form, sampling) in enumerate(zip(prompt_forms, samplings)):
        prefill_only = _prefill_only(sampling, f"sampling_params[{i}]" if isinstance(raw, list) else "sampling_params")
        fields = {**common, **form, **sampling, "request_id": rids[i]}
        if logprob[i]:
            fields["logprobs"] = top[i]
            if start[i] >= 0:
                fields["prompt_logprobs"] = top[i]
        answers = [rids[i]] if n == 1 else [f"{rids[i]}_{j}" for j in range(n)]
        try:
            typed = parse_typed(fields, render_pb2.RenderCompletionRequest())
        except ServiceError as error:
            error.violations = [(RENDER_FIELDS.get(field, field), why) for field, why in error.violations]
            raise
        shown = (start[i], top[i]) if logprob[i] else (-1, 0)
        prompts.append(Prompt(typed, answers, logprob[i], *shown, prefill_only=prefill_only))
    stream = _flag(data, "stream")
    return GenerateBody(
        prompts,
        single and n == 1,
        stream,
        _flag(data, "return_text_in_logprobs"),
        _flag(data, "return_prompt_token_ids"),
        data,
    )
