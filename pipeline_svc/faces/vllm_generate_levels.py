"""vLLM 0.33's `output_mode` "text" and "derender" on `/inference/v1/generate` (unary): the engine's whole output,
derendered by DerenderService as the one hop derenders it, printed at vLLM's level.

- "text": each choice gains `text` (the output decoded: special tokens skipped unless `skip_special_tokens` is false,
  a matched stop string cut unless `include_stop_str_in_output`) and its `logprobs` carry decoded tokens and `bytes`
  (chat's shape); no parser reads it.
- "derender": each choice gains `message`, the assistant message parsed from the text (reasoning, tool calls) under
  the request's context: render's `scaleout.derender_context` where the body came from our render (its parsers,
  whether the prompt opened reasoning), vLLM's `parse_context` over it (tools, tool_choice, parallel_tool_calls,
  include_reasoning, chat_template_kwargs; alone: the served model's parsers); with neither, no parser reads it (the
  message is the text, as vLLM's without a parser). A `history_tool_call_cnt` other than 0 is refused: tool call ids
  here do not count the conversation's earlier calls.
Both need `sampling_params.detokenize` (vLLM's rule and words); "derender" is unary only, as vLLM's. Token ids,
finish and stop reasons stay the tokens level's.
"""

from __future__ import annotations

import grpc
from google.protobuf import json_format

from pipeline_svc.openai_response import chat_completion
from scaleout.v1 import derender_pb2
from scaleout_common.errors import ServiceError, clip
from scaleout_common.reasons import Reason, fail

LEVELS = ("tokens", "text", "derender")
PARSE_CONTEXT = ("tools", "tool_choice", "parallel_tool_calls", "include_reasoning", "chat_template_kwargs")
PARSE_CONTEXT += ("history_tool_call_cnt",)
TOOL_CHOICES = {
    "none": derender_pb2.TOOL_CHOICE_MODE_NONE,
    "auto": derender_pb2.TOOL_CHOICE_MODE_AUTO,
    "required": derender_pb2.TOOL_CHOICE_MODE_REQUIRED,
}
PROMPT_TAIL = 8  # prompt ids that seed detokenization (vLLM's derender reads as few)


def check_level(body: dict, stream: bool, detokenize: bool) -> str:
    mode = body.get("output_mode") or "tokens"
    if mode not in LEVELS:
        raise fail(Reason.INVALID_REQUEST, f"output_mode must be one of {list(LEVELS)}", "output_mode")
    if mode != "tokens" and not detokenize:
        why = f"output_mode={mode!r} requires sampling_params.detokenize to be true"
        raise fail(Reason.INVALID_REQUEST, why, "sampling_params.detokenize")
    if mode != "tokens" and stream:
        why = f"output_mode={mode!r} does not support stream=true here (its answer is unary)"
        raise fail(Reason.UNSUPPORTED_FIELD, why, "stream")
    context = body.get("parse_context")
    if mode == "derender" and isinstance(context, dict) and (unknown := sorted(set(context) - set(PARSE_CONTEXT))):
        why = f"Unknown parse_context fields {unknown}; the render server is newer than this generate server"
        raise fail(Reason.UNSUPPORTED_FIELD, clip(why), "parse_context")
    if mode == "derender" and isinstance(context, dict) and context.get("history_tool_call_cnt") not in (None, 0):
        why = "tool call ids here do not count the conversation's earlier calls: send 0"
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            f"parse_context.history_tool_call_cnt: {why}",
            "parse_context.history_tool_call_cnt",
        )
    return mode


def _from_parse_context(out: derender_pb2.DerenderContext, parse_context: dict) -> None:
    """vLLM's parse_context over `out` (render's context, or an empty one): what it names replaces out's."""
    out.ClearField("tools")
    try:
        json_format.ParseDict({"tools": parse_context.get("tools") or []}, out, ignore_unknown_fields=False)
    except json_format.ParseError as error:
        raise fail(Reason.INVALID_TOOL, f"parse_context.tools: {clip(str(error))}", "parse_context.tools") from None
    choice = parse_context.get("tool_choice", "none")
    if isinstance(choice, dict):
        out.tool_choice = derender_pb2.TOOL_CHOICE_MODE_NAMED
        out.tool_choice_function = str((choice.get("function") or {}).get("name", ""))
    elif choice in TOOL_CHOICES or choice is None:
        out.tool_choice = TOOL_CHOICES.get(choice or "none", derender_pb2.TOOL_CHOICE_MODE_NONE)
    else:
        raise fail(Reason.INVALID_TOOL_CHOICE, "parse_context.tool_choice: none, auto, required or a named tool",
                   "parse_context.tool_choice")  # fmt: skip
    out.parallel_tool_calls = parse_context.get("parallel_tool_calls") is not False
    if parse_context.get("include_reasoning") is False:
        out.reasoning_delivery = derender_pb2.REASONING_DELIVERY_OMITTED
    elif out.reasoning_delivery == derender_pb2.REASONING_DELIVERY_OMITTED:
        out.reasoning_delivery = derender_pb2.REASONING_DELIVERY_UNSPECIFIED
    out.chat_template_kwargs.Clear()
    out.chat_template_kwargs.update(parse_context.get("chat_template_kwargs") or {})


def level_context(mode: str, body: dict, rendered: dict | None, request, model: str) -> derender_pb2.DerenderContext:
    """The derender context for `mode`: render's (`rendered`, its scaleout.derender_context) or vLLM's parse_context
    at "derender"; the sampling params' text options and the prompt's tail at either level."""
    out = derender_pb2.DerenderContext()
    parse_context = body.get("parse_context")
    if mode == "derender" and rendered:
        json_format.ParseDict(rendered, out, ignore_unknown_fields=True)
    if mode == "derender" and isinstance(parse_context, dict):
        _from_parse_context(out, parse_context)
    elif mode != "derender" or not rendered:
        out.reasoning_parser = out.tool_parser = "none"  # plain text: no parser reads it
    params = body.get("sampling_params") or {}
    out.endpoint = derender_pb2.ENDPOINT_CHAT
    out.id, out.model, out.n = request.request_id, model, request.n or 1
    out.tokenizer_fingerprint = request.tokenizer_fingerprint
    out.skip_special_tokens = params.get("skip_special_tokens") is not False
    out.spaces_between_special_tokens = params.get("spaces_between_special_tokens") is not False
    out.include_stop_str_in_output = bool(params.get("include_stop_str_in_output"))
    stops = params.get("stop") or []
    out.stop[:] = [stops] if isinstance(stops, str) else list(stops)
    out.prompt_tail_token_ids[:] = list(request.token_ids)[-PROMPT_TAIL:]
    out.ClearField("top_logprobs")
    if request.sampling_params.HasField("logprobs"):
        out.top_logprobs = max(request.sampling_params.logprobs, 0)
    out.include_usage = out.continuous_usage_stats = out.echo = False
    return out


async def leveled(hops, mode: str, derender_context, results: list, tokens_answer: dict, context) -> dict:
    """The tokens level's answer raised to `mode`: each choice with its `text` or `message`, its logprobs decoded."""
    try:
        answer = await hops.derender.DerenderChat(
            derender_pb2.DerenderChatRequest(context=derender_context, results=results),
            timeout=context.time_remaining(),
        )
    except grpc.aio.AioRpcError as error:
        raise ServiceError.from_rpc_error(error) from None
    derendered = {choice["index"]: choice for choice in chat_completion(answer)["choices"]}
    for choice in tokens_answer["choices"]:
        ours = derendered.get(choice["index"], {})
        message = ours.get("message") or {"role": "assistant", "content": ""}
        choice["logprobs"] = ours.get("logprobs")
        if mode == "text":
            choice["text"] = message.get("content") or ""
        else:
            choice["message"] = message
    return tokens_answer | {"output_mode": mode}
