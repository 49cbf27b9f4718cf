"""vLLM 0.33's unary derender routes (`POST /v1/chat/completions/derender`, `/v1/completions/derender`) as a face over
DerenderService (vllm_server.proto, VllmServerService.DerenderChat / DerenderCompletion).

vLLM's body carries its own `/inference/v1/generate` answer (`generate_response`, or `generate_responses` one per
prompt) and the request its render was given (`chat_request`, `completion_request`). Render turns that request into
our DerenderContext (its vLLM render route's `scaleout.derender_context`: tools, parsers, stop strings, logprob counts,
the prompt's tail), the answer becomes our GenerateResponse (ENGINE_CHOICE below), derender parses it, and the answer
is printed as the one-hop routes print OpenAI's (openai_response.py) with vLLM's derender fields over it:

| vLLM                | here                                                                                         |
|---------------------|----------------------------------------------------------------------------------------------|
| id                  | generate_response.request_id (completions: the first's)                                      |
| model               | the request's `model` (a served name, else 404), else the served one                         |
| usage               | prompt_tokens (0 when absent; completions: their sum), the answers' token ids counted         |
| prompt_logprobs     | the generate answer's, as sent (chat)                                                        |
| prompt_token_ids    | the generate answer's, when chat_request.return_token_ids (chat)                             |
| kv_transfer_params  | the generate answer's (completions: all the same, else 400, as vLLM)                         |
| metrics             | the generate answer's (completions: with one prompt only, as vLLM)                           |

`prompt_token_ids` in the body seeds detokenization (the context's prompt tail), else the generate answer's, as
vLLM's. Without `chat_request` / `completion_request` (vLLM's defaults), render's context for a request of the
route's kind that sets nothing is used, its prompt tail dropped; a chat without one is refused where render names a
tool or reasoning parser (vLLM's rule and words). Refused naming the field: an answer not at output mode `tokens`,
keys vLLM does not have. The per-chunk form (`stream: true`, vLLM's client-carried `stream_state`) is
vllm_derender_stream.py.
"""

from __future__ import annotations

import json
from typing import cast

import grpc
from google.api import httpbody_pb2
from google.protobuf import json_format

from pipeline_svc.faces.rl_json import only, typed
from pipeline_svc.faces.vllm_generate_levels import PROMPT_TAIL
from pipeline_svc.faces.vllm_generate_output import usage
from pipeline_svc.faces.vllm_generate_request import token_ids
from pipeline_svc.hops import Hops
from pipeline_svc.openai_response import chat_completion, completion
from pipeline_svc.request_metrics import as_vllms
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import common_pb2, derender_pb2, engine_pb2, render_pb2
from scaleout_common import finish_reasons
from scaleout_common.errors import ServiceError, clip
from scaleout_common.reasons import Reason, fail
from scaleout_common.sampling_rules import MAX_CHOICES

CHAT = ("stream", "model", "generate_response", "prompt_tokens", "prompt_token_ids", "chat_request")
COMPLETION = ("stream", "model", "generate_responses", "prompt_tokens", "prompt_token_ids", "completion_request")
# vLLM's GenerateTokensResponse and its choices: the keys taken (the null-only ones as /inference/v1/generate prints)
ANSWER = (
    *("request_id", "model", "created", "usage", "prompt_logprobs", "prompt_token_id_logprobs", "prompt_token_ids"),
    *("mm_placeholders", "metrics", "kv_transfer_params", "ec_transfer_params", "output_mode", "choices"),
)
ENGINE_CHOICE = ("index", "finish_reason", "stop_reason", "token_ids", "routed_experts", "sampling_mask")
ENGINE_CHOICE += ("weight_versions", "logprobs")


def check_bounds(answers: list, max_model_len: int, prompts: list) -> None:
    """vLLM's derender bounds and words, before anything is decoded: at most MAX_CHOICES answers and choices an
    answer (vLLM's VLLM_MAX_N_SEQUENCES; here the choices one request may hold), token ids, logprob entries and
    prompt ids at most max_model_len; empty token ids refused."""
    if len(answers) > MAX_CHOICES:
        why = f"generate_responses count ({len(answers)}) exceeds server maximum ({MAX_CHOICES})."
        raise fail(Reason.TOO_MANY_CHOICES, why, "generate_responses")
    for ids in prompts:
        if isinstance(ids, list) and len(ids) > max_model_len:
            why = f"prompt_token_ids length ({len(ids)}) exceeds max_model_len ({max_model_len})."
            raise fail(Reason.TOO_MANY_TOKENS, why, "prompt_token_ids")
    for answer in answers:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list):
            continue  # engine_result names the shape
        name = clip(str(answer.get("request_id", "")), 100)
        if len(choices) > MAX_CHOICES:
            why = f"choices count ({len(choices)}) in response '{name}' exceeds server maximum ({MAX_CHOICES})."
            raise fail(Reason.TOO_MANY_CHOICES, why, "choices")
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            index, tokens = choice.get("index"), choice.get("token_ids")
            content = (choice.get("logprobs") or {}).get("content") or []
            for what, length in (("token_ids", len(tokens or [])), ("logprobs.content", len(content))):
                if length > max_model_len:
                    why = f"{what} length ({length}) in choice {index} exceeds max_model_len ({max_model_len})."
                    raise fail(Reason.TOO_MANY_TOKENS, why, what)
            if not tokens:
                raise fail(Reason.INVALID_REQUEST, f"choice {index} has empty or null token_ids", "token_ids")


def logprobs_as_given(context: derender_pb2.DerenderContext, results: list, asked: bool) -> None:
    """vLLM's rule: a choice that carries logprobs has them printed, every candidate unless the request asked for
    logprobs (then its count cuts them, as the context already says)."""
    if asked or not any(c.logprobs.logprobs for r in results for c in r.choices):
        return
    context.top_logprobs = max(
        (len(t.token_ids) for r in results for c in r.choices for t in c.logprobs.top), default=0
    )


def engine_result(answer, field: str) -> engine_pb2.GenerateResponse:
    """vLLM's GenerateTokensResponse as our engine's one whole-output message (ENGINE_CHOICE's fields mapped back:
    finish_reason by name, stop_reason as the token id or string, logprobs.content as parallel arrays)."""
    only(typed(answer, dict, field), ANSWER, field)
    if answer.get("output_mode", "tokens") != "tokens":
        raise fail(Reason.UNSUPPORTED_FIELD, f"{field}.output_mode: only 'tokens' answers", f"{field}.output_mode")
    message = engine_pb2.GenerateResponse(request_id=typed(answer.get("request_id", ""), str, f"{field}.request_id"))
    message.finished = True
    for i, choice in enumerate(typed(answer.get("choices"), list, f"{field}.choices")):
        path = f"{field}.choices[{i}]"
        try:
            engine_choice(message.choices.add(), typed(choice, dict, path), path)
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise fail(Reason.INVALID_REQUEST, f"{path} is not vLLM's choice: {clip(str(error))}", path) from None
    if answer.get("kv_transfer_params"):
        json_format.ParseDict(
            typed(answer["kv_transfer_params"], dict, f"{field}.kv_transfer_params"), message.kv_transfer_params
        )
    return message


def engine_choice(out: engine_pb2.GenerateChoice, choice: dict, path: str, whole: bool = True) -> None:
    """One of vLLM's choices as our engine's (`whole`: an answer's, whose null finish_reason is "stop"; else a
    streamed chunk's, null until the choice ends)."""
    only(choice, ENGINE_CHOICE, path)
    out.index = choice["index"]
    out.token_ids.extend(token_ids(choice.get("token_ids") or [], f"{path}.token_ids"))
    name = choice.get("finish_reason") or ("stop" if whole else None)
    if name:
        out.finish_reason = cast(common_pb2.FinishReason, finish_reasons.from_openai_name(name))
    stop = choice.get("stop_reason")
    if isinstance(stop, str):
        out.stop_str = stop
    elif stop is not None:
        out.stop_token_id = stop
    for entry in (choice.get("logprobs") or {}).get("content") or []:
        out.logprobs.logprobs.append(entry["logprob"])
        out.logprobs.ranks.append(entry.get("rank") or 0)
        top = sorted(entry.get("top_logprobs") or [], key=lambda t: -t["logprob"])
        out.logprobs.top.add(token_ids=[t["token_id"] for t in top], logprobs=[t["logprob"] for t in top])


async def request_contexts(
    hops: Hops, body: dict, field: str, context, prompts: int = 1
) -> tuple[dict, list[derender_pb2.DerenderContext]]:
    """body[field], the request render rebuilds the derender contexts from (chat_request: one; completion_request:
    one per prompt), and the contexts. Absent, a request of that kind setting nothing stands in (vLLM's defaults:
    no tools, stops or logprobs) and its contexts carry no prompt tail; a chat's is refused where render configures
    a tool or reasoning parser, as vLLM refuses it."""
    given = body.get(field)
    chat = field == "chat_request"
    if given is not None:
        request = typed(given, dict, field)
    else:
        request = {"messages": [{"role": "user", "content": ""}]} if chat else {"prompt": [[0]] * max(prompts, 1)}
    method = "RenderChatVllm" if chat else "RenderCompletionVllm"
    contexts = await rendered_contexts(hops, method, request, field, context)
    if given is None:
        if chat and any(c.reasoning_parser or c.tool_parser for c in contexts):
            why = "chat_request is required when a tool or reasoning parser is configured"
            raise fail(Reason.UNSUPPORTED_FIELD, why, field)
        for derender_context in contexts:
            del derender_context.prompt_tail_token_ids[:]
    return request, contexts


def seed(context: derender_pb2.DerenderContext, prompt_ids, field: str, fallback=None) -> None:
    """The context's prompt tail from `prompt_ids` (the client's), else `fallback` (the generate answer's)."""
    prompt_ids = prompt_ids if prompt_ids is not None else fallback
    if prompt_ids is not None:
        ids = token_ids(prompt_ids, field)
        context.prompt_tail_token_ids[:] = ids[-(len(context.prompt_tail_token_ids) or PROMPT_TAIL) :]


def _usage(prompt: int, results: list[engine_pb2.GenerateResponse]) -> dict:
    return usage(prompt, sum(len(c.token_ids) for r in results for c in r.choices), None)


async def rendered_contexts(
    hops: Hops, method: str, request, field: str, context
) -> list[derender_pb2.DerenderContext]:
    """Render's DerenderContexts for the request it was given (one per prompt), by its vLLM route `method`."""
    data = json.dumps(typed(request, dict, field)).encode()
    try:
        answer = await getattr(hops.render, method)(httpbody_pb2.HttpBody(data=data), timeout=context.time_remaining())
    except grpc.aio.AioRpcError as error:
        failure = ServiceError.from_rpc_error(error)
        failure.violations = [(f"{field}.{name}", why) for name, why in failure.violations]
        raise failure from None
    rendered = json.loads(answer.data)
    rendered = rendered if isinstance(rendered, list) else [rendered]
    return [json_format.ParseDict(r["scaleout"]["derender_context"], derender_pb2.DerenderContext()) for r in rendered]


class VllmDerender:
    def __init__(self, hops: Hops, model_name):
        self.hops = hops
        self.model_name = model_name  # (asked name or None, context) -> the served name, 404 for another
        self.max_model_len = 0  # the served model's, once asked of render

    async def _max_model_len(self, context) -> int:
        if not self.max_model_len:
            models = await self.hops.render.ListModels(render_pb2.ListModelsRequest(), timeout=context.time_remaining())
            self.max_model_len = models.data[0].max_model_len
        return self.max_model_len

    async def chat(self, body: dict, context) -> httpbody_pb2.HttpBody:
        only(body, CHAT)
        model = await self.model_name(typed(body.get("model") or "", str, "model") or None, context)
        check_bounds(
            [body.get("generate_response")], await self._max_model_len(context), [body.get("prompt_token_ids")]
        )
        result = engine_result(body.get("generate_response"), "generate_response")
        chat_request, (derender_context,) = await request_contexts(self.hops, body, "chat_request", context)
        given = body["generate_response"].get("prompt_token_ids")
        seed(derender_context, body.get("prompt_token_ids"), "prompt_token_ids", given)
        logprobs_as_given(derender_context, [result], bool(chat_request.get("logprobs")))
        try:
            answer = await self.hops.derender.DerenderChat(
                derender_pb2.DerenderChatRequest(context=derender_context, results=[result]),
                timeout=context.time_remaining(),
            )
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None
        given = body["generate_response"]
        return_ids = bool(chat_request.get("return_token_ids"))
        out = chat_completion(answer) | {"id": result.request_id, "model": model}
        out["prompt_logprobs"] = given.get("prompt_logprobs")
        out["prompt_token_ids"] = given.get("prompt_token_ids") if return_ids else None
        hidden = chat_request.get("include_reasoning") is False  # vLLM hides per-token metadata then
        for choice, engine in zip(out["choices"], result.choices):
            message = choice["message"]
            message.setdefault("reasoning", None)  # vLLM's message prints it
            if message.get("content") == "" and (message["reasoning"] is not None or message.get("tool_calls")):
                message["content"] = None  # all parsed away: vLLM's parsers leave no content
            if hidden:
                choice["logprobs"] = None
            elif return_ids:
                choice["token_ids"] = list(engine.token_ids)
        out["usage"] = _usage(typed(body.get("prompt_tokens") or 0, int, "prompt_tokens"), [result])
        metrics = as_vllms(given.get("metrics"))
        return json_body(out | {"kv_transfer_params": given.get("kv_transfer_params"), "metrics": metrics})

    async def completion(self, body: dict, context) -> httpbody_pb2.HttpBody:
        only(body, COMPLETION)
        model = await self.model_name(typed(body.get("model") or "", str, "model") or None, context)
        answers = typed(body.get("generate_responses"), list, "generate_responses")
        if not answers:
            raise fail(Reason.INVALID_REQUEST, "generate_responses must not be empty", "generate_responses")
        check_bounds(answers, await self._max_model_len(context), body.get("prompt_token_ids") or [])
        results = [engine_result(a, f"generate_responses[{i}]") for i, a in enumerate(answers)]
        request, contexts = await request_contexts(self.hops, body, "completion_request", context, len(results))
        counts = typed(body.get("prompt_tokens") or [0] * len(results), list, "prompt_tokens")
        seeds = typed(body.get("prompt_token_ids") or [None] * len(results), list, "prompt_token_ids")
        if not len(contexts) == len(results) == len(counts) == len(seeds):
            why = f"generate_responses: one per prompt of completion_request ({len(contexts)}), as prompt_tokens"
            raise fail(Reason.INVALID_REQUEST, why, "generate_responses")
        kv = [a.get("kv_transfer_params") for a in answers]
        if any(params != kv[0] for params in kv):
            raise fail(Reason.INVALID_REQUEST, "kv_transfer_params differ across responses", "generate_responses")
        for i, (derender_context, ids, given) in enumerate(zip(contexts, seeds, answers)):
            seed(derender_context, ids, f"prompt_token_ids[{i}]", given.get("prompt_token_ids"))
            logprobs_as_given(derender_context, [results[i]], request.get("logprobs") is not None)
        prompts = [derender_pb2.CompletionResult(context=c, results=[r]) for c, r in zip(contexts, results)]
        try:
            answer = await self.hops.derender.DerenderCompletion(
                derender_pb2.DerenderCompletionRequest(prompts=prompts), timeout=context.time_remaining()
            )
        except grpc.aio.AioRpcError as error:
            raise ServiceError.from_rpc_error(error) from None
        out = completion(answer, streamed=False) | {"id": results[0].request_id if results else "", "model": model}
        out["usage"] = _usage(sum(typed(n, int, "prompt_tokens") for n in counts), results)
        metrics = as_vllms(answers[0].get("metrics")) if len(answers) == 1 else None  # one prompt's, as vLLM
        return json_body(out | {"kv_transfer_params": kv[0] if kv else None, "metrics": metrics})
