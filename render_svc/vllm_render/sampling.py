"""`sampling_params` as vLLM 0.33 prints it: its SamplingParams (a msgspec struct with omit_defaults) after
`ChatCompletionRequest.to_sampling_params` / `CompletionRequest.to_sampling_params` and `__post_init__`.

What vLLM prints, field by field (its order):
- the six float knobs always (msgspec compares floats to their defaults by identity, and every one is a new
  object), but top_p and min_p not under greedy sampling (temperature < 1e-5 resets them to the defaults
  themselves); a temperature in (0, 0.01) becomes 0.01;
- n, top_k, max_tokens, min_tokens only where they differ from 1, 0, 16, 0; seed, logprobs, prompt_logprobs,
  stream_interval, thinking_token_budget, logit_bias, allowed_token_ids, logprob_token_ids where set (echo:
  prompt_logprobs is the output's count, chat's top_logprobs even when 0; logprob_token_ids leave logprobs out);
- stop, stop_token_ids (deduplicated), bad_words (deduplicated) always, as lists;
- skip_special_tokens false where asked, or where the tool parser keeps them (tools and a tool_choice other than
  "none", as vLLM's hermes parser adjusts the request); spaces_between_special_tokens false where asked;
- output_kind 1 (DELTA) when streamed, else 2 (FINAL_ONLY); skip_clone true; output_text_buffer_length (the
  longest stop string but one, unless stop strings stay in the output) where not 0;
- structured_outputs: our resolved constraint in vLLM's StructuredOutputsParams form (the same object vLLM
  builds from `structured_outputs` / `response_format`; a forced tool choice shows the constraint this
  deployment enforces, which is not vLLM's parser-built structural tag);
- skip_reading_prefix_cache: whether prompt logprobs are asked for.
"""

from __future__ import annotations

import json

from scaleout.v1 import common_pb2

# vLLM's _DEFAULT_SAMPLING_PARAMS: a knob nobody set (neither the request nor generation_config.json).
NEUTRAL = {
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
}
MAX_TEMP, SAMPLING_EPS = 1e-2, 1e-5
DEFAULT_MAX_TOKENS = 16
DELTA, FINAL_ONLY = 1, 2
LOGIT_BIAS_LIMIT = 100.0


def sampling_params(
    body: dict,
    defaults: dict,
    max_tokens: int,
    constraint: common_pb2.StructuredOutputs | None,
    chat: bool,
    tool_parser: bool,
) -> dict:
    """`body`: the client's JSON (nulls dropped); `defaults`: generation_config's values; `max_tokens`: the
    resolved one (render's); `constraint`: the one render compiled; `tool_parser`: the server parses tool calls."""
    knobs = {name: body.get(name, defaults.get(name, neutral)) for name, neutral in NEUTRAL.items()}
    temperature = float(knobs["temperature"])
    temperature = MAX_TEMP if 0 < temperature < MAX_TEMP else temperature
    greedy = temperature < SAMPLING_EPS
    out: dict = {}
    if body.get("n", 1) != 1:
        out["n"] = body["n"]
    for name in ("presence_penalty", "frequency_penalty", "repetition_penalty"):
        out[name] = float(knobs[name])
    out["temperature"] = temperature
    if "watermarking" in body:
        out["watermarking"] = body["watermarking"]
    if not greedy:
        out["top_p"] = float(knobs["top_p"])
        if knobs["top_k"] != 0:
            out["top_k"] = knobs["top_k"]
        out["min_p"] = float(knobs["min_p"])
    if body.get("seed", -1) != -1:
        out["seed"] = body["seed"]
    stop = body.get("stop", [])
    stop = [stop] if isinstance(stop, str) else list(stop)
    out["stop"] = stop
    out["stop_token_ids"] = list(dict.fromkeys(body.get("stop_token_ids", ())))
    if body.get("ignore_eos"):
        out["ignore_eos"] = True
    if max_tokens != DEFAULT_MAX_TOKENS:
        out["max_tokens"] = max_tokens
    if body.get("min_tokens", 0) != 0:
        out["min_tokens"] = body["min_tokens"]
    logprobs = (body.get("top_logprobs", 0) if body.get("logprobs") else None) if chat else body.get("logprobs")
    named = body.get("logprob_token_ids") or None
    if logprobs is not None and not named:  # the named ids replace the count
        out["logprobs"] = logprobs
    prompt_logprobs = body.get("prompt_logprobs")
    if prompt_logprobs is None and body.get("echo"):
        prompt_logprobs = body.get("top_logprobs", 0) if chat else logprobs
    if prompt_logprobs is not None:
        out["prompt_logprobs"] = prompt_logprobs
    if named:
        out["logprob_token_ids"] = named
    tools_kept = tool_parser and chat and body.get("tools") and body.get("tool_choice", "auto") != "none"
    if body.get("skip_special_tokens") is False or tools_kept:
        out["skip_special_tokens"] = False
    if body.get("spaces_between_special_tokens") is False:
        out["spaces_between_special_tokens"] = False
    if body.get("include_stop_str_in_output"):
        out["include_stop_str_in_output"] = True
    out["output_kind"] = DELTA if body.get("stream") else FINAL_ONLY
    if "stream_interval" in body:
        out["stream_interval"] = body["stream_interval"]
    out["skip_clone"] = True
    if stop and not body.get("include_stop_str_in_output") and max(map(len, stop)) > 1:
        out["output_text_buffer_length"] = max(map(len, stop)) - 1
    if constraint is not None:
        out["structured_outputs"] = structured_outputs(constraint, body.get("structured_outputs"))
    if "logit_bias" in body:
        out["logit_bias"] = {
            str(int(k)): min(LOGIT_BIAS_LIMIT, max(-LOGIT_BIAS_LIMIT, v)) for k, v in body["logit_bias"].items()
        }
    if "allowed_token_ids" in body:
        out["allowed_token_ids"] = body["allowed_token_ids"]
    out["bad_words"] = list(dict.fromkeys(body.get("bad_words", ())))
    out["skip_reading_prefix_cache"] = prompt_logprobs is not None
    if body.get("thinking_token_budget", -1) != -1:
        out["thinking_token_budget"] = body["thinking_token_budget"]
    return out


def structured_outputs(constraint: common_pb2.StructuredOutputs, given=None) -> dict:
    """Our constraint as vLLM's StructuredOutputsParams prints (a dataclass: every field, private ones too);
    `given`: the request's structured_outputs, whose `json` vLLM keeps as sent (an object or its JSON text)."""
    kind = constraint.WhichOneof("constraint")
    schema = None
    if kind == "json_schema":
        text = given.get("json") if isinstance(given, dict) else None
        schema = text if isinstance(text, str) else json.loads(constraint.json_schema)
    return {
        "json": schema,
        "regex": constraint.regex if kind == "regex" else None,
        "choice": list(constraint.choice.values) if kind == "choice" else None,
        "grammar": constraint.grammar if kind == "grammar" else None,
        "json_object": True if kind == "json_object" else None,
        "disable_any_whitespace": constraint.disable_any_whitespace,
        "disable_additional_properties": constraint.disable_additional_properties,
        "whitespace_pattern": constraint.whitespace_pattern or None,
        "structural_tag": constraint.structural_tag if kind == "structural_tag" else None,
        "_backend": None,
        "_backend_was_auto": False,
    }


def tools(body_tools: list[dict] | None) -> list[dict] | None:
    """parse_context.tools as vLLM prints its ChatCompletionToolsParam: `description` and `parameters` always
    (null when absent), `strict` only where set."""
    if not body_tools:
        return None
    out = []
    for tool in body_tools:
        function = tool.get("function", {})
        printed = {
            "name": function.get("name"),
            "description": function.get("description"),
            "parameters": function.get("parameters"),
        }
        if function.get("strict") is not None:
            printed["strict"] = function["strict"]
        out.append({"type": "function", "function": printed})
    return out
