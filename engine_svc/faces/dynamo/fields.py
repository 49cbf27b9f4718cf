"""Dynamo's token-in request (its `PreprocessedRequest` as the worker receives it, ai-dynamo 1.6.1) onto our
GenerateRequest, and our GenerateResponse back as Dynamo's output chunks (`LLMEngineOutput`).

Every key is mapped, left to the Dynamo side that already applied it, or refused (UNSUPPORTED_FIELD, naming it);
an absent, null or neutral value (false, 0, empty) is no request. A key not in these tables is refused too, so a
newer Dynamo's field is never taken and ignored.

| Dynamo request                          | ours                                                                  |
|-----------------------------------------|-----------------------------------------------------------------------|
| token_ids                               | token_ids                                                             |
| eos_token_ids                           | the engine's own EOS ids stop it anyway; others -> stop_token_ids      |
| model                                   | the frontend routed by it (the served name this worker registered)    |
| stop_conditions.max_tokens / min_tokens | max_tokens / min_tokens                                               |
| stop_conditions.stop                    | stop (matched by the engine; the frontend trims the text)             |
| stop_conditions.stop_token_ids(_hidden, | stop_token_ids                                                        |
|   _visible)                             |                                                                       |
| stop_conditions.ignore_eos              | ignore_eos                                                            |
| stop_conditions.max_thinking_tokens     | refused (no reasoning tags on this path)                              |
| sampling_options.temperature, top_p,    | the same (top_k -1 or 0: no cut)                                      |
|   top_k, min_p, seed, repetition_/      |                                                                       |
|   presence_/frequency_penalty           |                                                                       |
| sampling_options.n, best_of            | 1 only: the Worker of dynamo.common.backend, which runs this worker,   |
|                                         | ends a stream at its first chunk with a finish_reason (its Rust        |
|                                         | EngineAdapter), so a second choice would be cut (docs/dynamo.md)       |
| sampling_options.use_beam_search,       | refused (no beam search)                                              |
|   length_penalty                        |                                                                       |
| sampling_options.include_stop_str_in_output | refused when true (the frontend cuts the stop string)             |
| sampling_options.guided_decoding        | structured_outputs: json (object or text) -> json_schema, regex,      |
|                                         | choice, grammar, structural_tag, whitespace_pattern; backend only     |
|                                         | "xgrammar"; JSON without free whitespace unless a whitespace_pattern  |
|                                         | (render's default)                                                    |
| output_options.logprobs                 | logprobs -> chunk log_probs, top_logprobs                             |
| output_options.skip_special_tokens      | the frontend's text; stop_keep_special_tokens = not it (stop strings)  |
| output_options.formatted_prompt,        | the frontend's (it renders and formats)                               |
|   return_tokens_as_token_ids            |                                                                       |
| output_options.prompt_logprobs,         | refused                                                               |
|   no_stop_trim                          |                                                                       |
| routing.cache_salt                      | cache_salt                                                            |
| routing.priority                        | -priority (Dynamo's higher is sooner, ours lower: as Dynamo's vLLM)   |
| routing.dp_rank                         | 0 only (one rank)                                                     |
| routing.lora_name                       | lora_name (an adapter the engine does not serve: LORA_NOT_FOUND)      |
| routing (the rest), router,             | the router's, applied before the request reached this worker          |
|   router_config_override, annotations,  |                                                                       |
|   mdc_sum, agent_context, migration_link|                                                                       |
|   request_timestamp_ms, _HEALTH_CHECK   |                                                                       |
| prompt_embeds, multi_modal_data,        | refused (token-id text prompts only)                                  |
|   mm_routing_info, mm_processor_kwargs, |                                                                       |
|   encoder_result, multi_modal_uuids,    |                                                                       |
|   image_cache_scope, media_io_kwargs    |                                                                       |
| prefill_result, bootstrap_info          | refused (disaggregated serving: not through this face)                |
| generate_request, extra_args,           | refused                                                               |
|   require_reasoning, kv_hint            |                                                                       |

| ours (GenerateResponse)                 | Dynamo output chunk                                                   |
|-----------------------------------------|-----------------------------------------------------------------------|
| choices[i].token_ids, index             | token_ids, index                                                      |
| finish STOP without stop_reason         | finish_reason "eos"                                                   |
| finish STOP with stop_token_id/stop_str | finish_reason "stop", stop_reason (the id or the string)             |
| finish LENGTH / ABORT / ERROR           | "length" / "cancelled" / "error: <message>"                           |
| choices[i].logprobs                     | log_probs; top_logprobs [{rank, token_id, token, logprob}]           |
| usage (last message)                    | completion_usage {prompt/completion/total_tokens,                     |
|                                         |   prompt_tokens_details.cached_tokens}                                |
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from scaleout.v1 import common_pb2, engine_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

UPSTREAM = "applied by Dynamo before the request reached this worker"
TOP_LEVEL_UPSTREAM = {"model", "router", "router_config_override", "annotations", "mdc_sum", "agent_context"}
TOP_LEVEL_UPSTREAM |= {"migration_link", "request_timestamp_ms", "_HEALTH_CHECK"}
TOP_LEVEL_REFUSED = {"prompt_embeds", "multi_modal_data", "mm_routing_info", "mm_processor_kwargs", "encoder_result"}
TOP_LEVEL_REFUSED |= {"prefill_result", "bootstrap_info", "generate_request", "extra_args", "require_reasoning"}
TOP_LEVEL_REFUSED |= {"kv_hint", "multi_modal_uuids", "image_cache_scope", "media_io_kwargs"}
SAME_SAMPLING = ("temperature", "top_p", "min_p", "seed", "repetition_penalty", "presence_penalty")
SAME_SAMPLING += ("frequency_penalty",)
ROUTING_UPSTREAM = {"backend_instance_id", "prefill_worker_id", "decode_worker_id", "prefill_dp_rank"}
ROUTING_UPSTREAM |= {"expected_output_tokens", "priority_jump", "strict_priority", "allowed_worker_ids"}
ROUTING_UPSTREAM |= {"routing_constraints"}
GUIDED = {"json": "json_schema", "regex": "regex", "grammar": "grammar", "whitespace_pattern": "whitespace_pattern"}
FINISH = {
    common_pb2.FINISH_REASON_LENGTH: "length",
    common_pb2.FINISH_REASON_ABORT: "cancelled",
}
MAX_ERROR_CHARS = 500  # an engine error's message, as it is told to the client


def refused(name: str, why: str) -> ServiceError:
    return fail(Reason.UNSUPPORTED_FIELD, f"{name}: {why}", field=name)


def _given(value: Any) -> bool:
    return value is not None and value is not False and value != 0 and value != [] and value != {} and value != ""


def _check_keys(group: str, values: dict, known: set[str]) -> None:
    for key, value in values.items():
        if key not in known and _given(value):
            raise refused(f"{group}{key}", "not a field this worker knows")


def generate_request(
    request: dict, request_id: str, engine_eos: set[int], fingerprint: str
) -> engine_pb2.GenerateRequest:
    """Our GenerateRequest for one Dynamo request (ServiceError naming a refused field)."""
    known = {"token_ids", "eos_token_ids", "stop_conditions", "sampling_options", "output_options", "routing"}
    for key in TOP_LEVEL_REFUSED:
        if _given(request.get(key)):
            raise refused(key, "not supported by the scaleout engine's Dynamo worker")
    _check_keys("", request, known | TOP_LEVEL_UPSTREAM | TOP_LEVEL_REFUSED)
    params = common_pb2.SamplingParams()
    out = engine_pb2.GenerateRequest(request_id=request_id, tokenizer_fingerprint=fingerprint)
    out.token_ids.extend(request.get("token_ids") or [])
    _stop_conditions(request.get("stop_conditions") or {}, params)
    if not params.ignore_eos:
        extra_eos = [t for t in request.get("eos_token_ids") or [] if t not in engine_eos]
        params.stop_token_ids.extend(t for t in extra_eos if t not in params.stop_token_ids)
    _sampling_options(request.get("sampling_options") or {}, params)
    _output_options(request.get("output_options") or {}, params)
    _routing(request.get("routing") or {}, out)
    out.sampling_params.CopyFrom(params)
    return out


def _stop_conditions(values: dict, params: common_pb2.SamplingParams) -> None:
    known = {"max_tokens", "min_tokens", "stop", "stop_token_ids", "stop_token_ids_hidden", "ignore_eos"}
    known |= {"stop_token_ids_visible"}
    known |= {"max_thinking_tokens"}
    _check_keys("stop_conditions.", values, known)
    if _given(values.get("max_thinking_tokens")):
        raise refused("stop_conditions.max_thinking_tokens", "no thinking budget on this worker")
    if values.get("max_tokens") is not None:
        params.max_tokens = values["max_tokens"]
    if values.get("min_tokens"):
        params.min_tokens = values["min_tokens"]
    params.stop.extend(values.get("stop") or [])
    for key in ("stop_token_ids", "stop_token_ids_hidden", "stop_token_ids_visible"):  # the frontend shows or hides
        params.stop_token_ids.extend(t for t in values.get(key) or [] if t not in params.stop_token_ids)
    params.ignore_eos = bool(values.get("ignore_eos"))


def _sampling_options(values: dict, params: common_pb2.SamplingParams) -> None:
    handlers: dict[str, Callable[[Any], None]] = {
        "top_k": lambda v: v > 0 and setattr(params, "top_k", v),  # -1 or 0: no cut
        "guided_decoding": lambda v: _guided(v, params),
    }
    known = set(handlers) | set(SAME_SAMPLING) | {"n", "best_of", "use_beam_search", "length_penalty"}
    known |= {"include_stop_str_in_output"}
    _check_keys("sampling_options.", values, known)
    for key in ("use_beam_search", "length_penalty", "include_stop_str_in_output"):
        if _given(values.get(key)):
            raise refused(f"sampling_options.{key}", "not supported by the scaleout engine's Dynamo worker")
    for key in ("n", "best_of"):
        if values.get(key) not in (None, 1):
            raise refused(
                f"sampling_options.{key}", "1 only (Dynamo's backend Worker ends a stream at its first finish)"
            )
    for key in SAME_SAMPLING:
        if values.get(key) is not None:
            setattr(params, key, values[key])
    for key, handle in handlers.items():
        if values.get(key) is not None:
            handle(values[key])


def _guided(values: dict, params: common_pb2.SamplingParams) -> None:
    _check_keys("sampling_options.guided_decoding.", values, set(GUIDED) | {"choice", "structural_tag", "backend"})
    if values.get("backend") not in (None, "", "xgrammar"):
        raise refused("sampling_options.guided_decoding.backend", "only xgrammar")
    constraint = params.structured_outputs
    for key, ours in GUIDED.items():
        value = values.get(key)
        if value is not None:
            setattr(constraint, ours, value if isinstance(value, str) else json.dumps(value))
    if values.get("choice"):
        constraint.choice.values.extend(values["choice"])
    if values.get("structural_tag") is not None:
        tag = values["structural_tag"]
        constraint.structural_tag = tag if isinstance(tag, str) else json.dumps(tag)
    if constraint.WhichOneof("constraint"):
        constraint.reasoning_ended = True
    # JSON without free whitespace, as render's default (render_svc/structured.py `compact`): a weak model given
    # any whitespace pretty-prints, or runs into max_tokens on it. Dynamo has no field for it.
    constraint.disable_any_whitespace = values.get("json") is not None and not values.get("whitespace_pattern")


def _output_options(values: dict, params: common_pb2.SamplingParams) -> None:
    known = {"logprobs", "prompt_logprobs", "skip_special_tokens", "formatted_prompt", "return_tokens_as_token_ids"}
    _check_keys("output_options.", values, known | {"no_stop_trim"})
    if _given(values.get("no_stop_trim")):
        raise refused("output_options.no_stop_trim", "the frontend trims the stop string")
    if values.get("prompt_logprobs") is not None:
        raise refused("output_options.prompt_logprobs", "not returned through this worker")
    if values.get("logprobs") is not None:
        params.logprobs = values["logprobs"]
    params.stop_keep_special_tokens = values.get("skip_special_tokens") is False


def _routing(values: dict, out: engine_pb2.GenerateRequest) -> None:
    _check_keys("routing.", values, ROUTING_UPSTREAM | {"cache_salt", "priority", "dp_rank", "lora_name"})
    if _given(values.get("dp_rank")):
        raise refused("routing.dp_rank", "one data-parallel rank (0)")
    out.cache_salt = values.get("cache_salt") or ""
    out.lora_name = values.get("lora_name") or ""
    out.priority = -(values.get("priority") or 0)  # Dynamo's higher runs sooner, ours lower


def chunks(message: engine_pb2.GenerateResponse, prompt_tokens: int) -> list[dict]:
    """Dynamo's output chunks for one message of our stream (usage rides on each choice's final chunk)."""
    out = []
    for choice in message.choices:
        chunk: dict[str, Any] = {"token_ids": list(choice.token_ids), "index": choice.index}
        if choice.HasField("logprobs") and choice.logprobs.logprobs:
            chunk["log_probs"] = list(choice.logprobs.logprobs)
            chunk["top_logprobs"] = [_top(row) for row in choice.logprobs.top]
        if choice.finish_reason:
            chunk.update(_finish(choice, message))
        out.append(chunk)
    if message.HasField("error") and not any(c.finish_reason for c in message.choices):
        out.append({"token_ids": [], "index": 0, "finish_reason": error_finish(message.error.message)})
    if message.finished and out and message.HasField("usage"):
        out[-1]["completion_usage"] = usage(message.usage, prompt_tokens)
    return out


def _top(row: common_pb2.TopLogprobs) -> list[dict]:
    return [
        {"rank": rank, "token_id": token, "token": None, "logprob": logprob}
        for rank, (token, logprob) in enumerate(zip(row.token_ids, row.logprobs, strict=True), start=1)
    ]


def _finish(choice: engine_pb2.GenerateChoice, message: engine_pb2.GenerateResponse) -> dict:
    reason = choice.finish_reason
    if reason == common_pb2.FINISH_REASON_STOP:
        stop = choice.WhichOneof("stop_reason")
        return {"finish_reason": "stop", "stop_reason": getattr(choice, stop)} if stop else {"finish_reason": "eos"}
    if reason in FINISH:
        return {"finish_reason": FINISH[reason]}
    return {"finish_reason": error_finish(message.error.message)}


def error_finish(message: str) -> str:
    """Dynamo's in-band failure (`FinishReason::Error`), after the first token."""
    return "error: " + (message or "the engine failed")[:MAX_ERROR_CHARS]


def usage(totals: common_pb2.Usage, prompt_tokens: int) -> dict:
    return {
        "prompt_tokens": totals.prompt_tokens or prompt_tokens,
        "completion_tokens": totals.completion_tokens,
        "total_tokens": totals.total_tokens or (prompt_tokens + totals.completion_tokens),
        "prompt_tokens_details": {"cached_tokens": totals.cached_tokens},
    }
