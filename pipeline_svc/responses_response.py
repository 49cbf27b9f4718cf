"""OpenAI's Responses JSON from derender's typed chat output: a Response object, or its server-sent events.

Output items come from the same parsed output the chat routes serve, in vLLM's order: reasoning -> a
`reasoning` item (its text as `reasoning_text` content; with `reasoning.summary` "auto" or "detailed", which
render's responses_chat.py checks, also its `summary`: one `summary_text` part holding the reasoning whole, the
most detailed summary there is; else `[]`, as OpenAI's answer without one), content -> an assistant `message`
item with one `output_text` part, each tool call -> a `function_call` item (`call_id` is the call's id, which
the client sends back with its `function_call_output`). `status` follows scaleout_common.finish_reasons (`length` is
`incomplete` with `incomplete_details.reason = "max_output_tokens"`, and the item it cut short `incomplete`, as
OpenAI marks it). With `include: ["message.output_text.logprobs"]` (or `top_logprobs`) the output_text carries
the logprobs of the tokens that wrote it (`text_logprobs`), and so does each of its deltas. The request's
settings are echoed
(instructions, tools, tool_choice, metadata, `store`, `previous_response_id`, ...) with the sampling values render
resolved. Reasoning tokens are not counted apart (`output_tokens_details.reasoning_tokens` is 0). The finished
Response goes to `keep` (the stored responses, responses_turn.py) before it is answered; a background one's
`snapshot`s (queued, in progress, cancelled) are stored as it runs (responses_background.py).

Streamed: `response.created` and `response.in_progress`, then per item `response.output_item.added`, its
content part (`response.content_part.added`), the deltas (`response.output_text.delta`,
`response.reasoning_text.delta`, `response.function_call_arguments.delta`), their `.done` events and
`response.output_item.done`; a summarized reasoning item's summary part streams beside its content part, each
step first (`response.reasoning_summary_part.added`, `response.reasoning_summary_text.delta` before each
`response.reasoning_text.delta`, `response.reasoning_summary_text.done` and `response.reasoning_summary_part.done`
before the content's `.done` events); an item closes when another kind of output starts. The stream ends with
`response.completed` (or `response.incomplete`) carrying the whole Response; one that fails after it
started ends with `error` and `response.failed`. Every event has its `sequence_number`.
With `return_token_ids` (our extension, vLLM's chat field) every snapshot of the Response has the prompt's
`prompt_token_ids`, and the finished one the sampled `token_ids`.

With vLLM's `--enable-per-request-metrics` the finished Response (unary, a stream's `response.completed` /
`.incomplete`, the stored one) has vLLM's `metrics` (request_metrics.py: the engine's timings, nulls printed,
`speculative_decoding` null as vLLM's Responses leave it); the snapshots before it have no key, as vLLM's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from pipeline_svc import request_metrics
from pipeline_svc.openai_response import logprob_entry
from pipeline_svc.shaped_route import Event
from scaleout.v1 import common_pb2, derender_pb2, engine_pb2, render_pb2
from scaleout_common import finish_reasons
from scaleout_common.errors import ServiceError
from scaleout_common.openai_errors import error_object
from scaleout_common.reasons import HTTP_STATUS

RUNNING = ("queued", "in_progress")  # a Response's statuses before it finished

# Request fields echoed in the Response as the client sent them, and their value when absent.
ECHOED = {
    "instructions": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "reasoning": None,
    "truncation": "disabled",
    "user": None,
    "safety_identifier": None,
    "prompt_cache_key": None,
    "prompt_cache_retention": None,
    "text": {"format": {"type": "text"}},
    "max_tool_calls": None,
    "previous_response_id": None,
    "store": False,
    "background": False,
}


def usage(total: common_pb2.Usage | None) -> dict | None:
    if total is None:
        return None
    return {
        "input_tokens": total.prompt_tokens,
        "input_tokens_details": {"cached_tokens": total.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": total.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": total.completion_tokens_details.reasoning_tokens},
        "total_tokens": total.total_tokens,
    }


class Items:
    """Item ids of one response: `rs_`, `msg_` and `fc_` + the response id's suffix + the output index."""

    def __init__(self, response_id: str):
        self.suffix = response_id.removeprefix("resp_")

    def id(self, prefix: str, output_index: int) -> str:
        return f"{prefix}_{self.suffix}{output_index}"


def _summarized(request: dict) -> bool:
    """The request asks for the reasoning's summary (`reasoning.summary`, or its deprecated `generate_summary`)."""
    reasoning = request.get("reasoning") or {}
    return bool(reasoning.get("summary") or reasoning.get("generate_summary"))


def _summary_part(text: str) -> dict:
    return {"type": "summary_text", "text": text}


def _reasoning_item(item_id: str, text: str, status: str, summary: bool) -> dict:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [_summary_part(text)] if summary else [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": status,
    }


def _opened_reasoning(item_id: str) -> dict:
    """A reasoning item as it opens: no summary parts and no content parts yet (their `.added` events follow)."""
    return _reasoning_item(item_id, "", "in_progress", False) | {"content": []}


def _text_part(text: str, logprobs: list[dict] | None = None) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def _message_item(item_id: str, text: str | None, status: str, logprobs: list[dict] | None = None) -> dict:
    content = [_text_part(text, logprobs)] if text is not None else []
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def text_logprobs(logprobs: derender_pb2.ChatLogprobs, text: str, alone: bool) -> list[dict]:
    """The logprobs of the tokens that wrote `text` (an output_text's), among an output's (or a chunk's) tokens,
    which may also hold reasoning, tags, tool calls and the stop token: those whose characters overlap where
    `text` sits in the tokens' joined text. `alone`: nothing else but a stop token was written, so where the
    tokens do not spell the text (byte tokens) they are all its."""
    entries = list(logprobs.content)
    if not entries or not text:
        return []
    joined = "".join(e.token for e in entries)
    needle = text.strip() or text
    start = joined.rfind(needle)
    if start < 0:
        return [logprob_entry(e) for e in entries] if alone else []
    end, at, out = start + len(needle), 0, []
    for entry in entries:
        if at < end and at + len(entry.token) > start:
            out.append(logprob_entry(entry))
        at += len(entry.token)
    return out


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> dict:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def _float32(value: float) -> float:
    """A float32 field's value as the shortest decimal that is the same float32: 0.7, not 0.699999988079071."""
    for digits in range(1, 10):
        short = float(f"{value:.{digits}g}")
        if struct.unpack("f", struct.pack("f", short))[0] == value:
            return short
    return value


def _envelope(rendered: render_pb2.RenderChatResponse, request: dict, status: str) -> dict:
    """Everything in a Response but its output and usage."""
    ctx, sampling = rendered.derender_context, rendered.generate_request.sampling_params
    out: dict[str, Any] = {
        "id": ctx.id,
        "object": "response",
        "created_at": ctx.created,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": ctx.model,
        "output": [],
        "temperature": _float32(sampling.temperature) if sampling.HasField("temperature") else None,
        "top_p": _float32(sampling.top_p) if sampling.HasField("top_p") else None,
        "max_output_tokens": sampling.max_tokens if sampling.HasField("max_tokens") else None,
        "service_tier": "default",
        "top_logprobs": request.get("top_logprobs") or 0,
        "usage": None,
    }
    out |= {name: default if request.get(name) is None else request[name] for name, default in ECHOED.items()}
    if ctx.return_token_ids:  # our extension (vLLM's chat field): on every snapshot of the Response
        out["prompt_token_ids"] = list(ctx.prompt_token_ids)
    return out


def _status(choice) -> tuple[str, str | None]:
    reason = finish_reasons.from_openai_name(choice.finish_reason if choice is not None else "")
    return finish_reasons.responses_status(reason)


def _finished(out: dict, choice, total: common_pb2.Usage | None) -> dict:
    status, incomplete = _status(choice)
    out["status"] = status
    out["incomplete_details"] = {"reason": incomplete} if incomplete else None
    out["usage"] = usage(total)
    return out


def timed(out: dict, outputs: list[engine_pb2.GenerateResponse]) -> dict:
    """The finished Response with vLLM's `metrics` of the engine's outputs (`--enable-per-request-metrics`)."""
    sampled = out["usage"]["output_tokens"] if out["usage"] else 0
    return out | {"metrics": request_metrics.per_request_metrics(outputs, sampled, speculation=False)}


def response(completion: derender_pb2.ChatCompletion, rendered: render_pb2.RenderChatResponse, request: dict) -> dict:
    """The Response of a whole (unary) answer."""
    choice = completion.choices[0]
    answer = choice.message
    items = Items(completion.id)
    output: list[dict] = []
    if answer.HasField("reasoning") and answer.reasoning:
        item_id = items.id("rs", len(output))
        output.append(_reasoning_item(item_id, answer.reasoning, "completed", _summarized(request)))
    if answer.HasField("content") and answer.content:
        alone = not answer.reasoning and not answer.tool_calls
        logprobs = text_logprobs(choice.logprobs, answer.content, alone)
        output.append(_message_item(items.id("msg", len(output)), answer.content, "completed", logprobs))
    for call in answer.tool_calls:
        item_id = items.id("fc", len(output))
        output.append(_call_item(item_id, call.id, call.function.name, call.function.arguments, "completed"))
    out = _envelope(rendered, request, "completed")
    out["output"] = output
    out = _finished(out, choice, completion.usage if completion.HasField("usage") else None)
    if "prompt_token_ids" in out:
        out["token_ids"] = list(choice.token_ids)
    if output and out["status"] == "incomplete":  # the last item is the one cut short
        output[-1]["status"] = "incomplete"
    return out


class ResponseStream:
    """The Responses events for one streamed answer, fed derender's chunks in order."""

    def __init__(
        self,
        rendered: render_pb2.RenderChatResponse,
        request: dict,
        keep: Callable[[dict], object] | None = None,
        metrics: bool = False,
    ):
        self.keep = keep  # called with the finished Response
        self.metrics = metrics  # vLLM's --enable-per-request-metrics
        self.outputs: list[engine_pb2.GenerateResponse] = []  # the engine's, given before `finish`
        self.envelope = _envelope(rendered, request, "in_progress")
        self.summary = _summarized(request)  # reasoning items carry a summary (the reasoning whole)
        self.items = Items(self.envelope["id"])
        self.sequence = 0
        self.output: list[dict] = []  # finished items
        self.open: dict | None = None  # the item being streamed
        self.text = ""  # the open item's text (or arguments)
        self.logprobs: list[dict] = []  # the open message's text logprobs
        self.calls: dict[int, int] = {}  # tool call index -> its output index
        self.choice = None  # the finishing chunk's choice
        self.usage: common_pb2.Usage | None = None
        self.token_ids: list[int] = []  # with return_token_ids: the sampled ids so far
        # Numbered first whenever they are sent: the stream starts with its first output.
        self.opening = [
            self._event("response.created", response=self._response()),
            self._event("response.in_progress", response=self._response()),
        ]

    def snapshot(self, status: str) -> dict:
        """The Response so far as `status` (a background one's `queued`, `in_progress`, `cancelled`): the items
        finished, then the open one as it stands (`incomplete` once the response is no longer in progress)."""
        out = self._response() | {"status": status, "usage": usage(self.usage)}
        if self.open is not None:
            out["output"].append(self._whole("in_progress" if status in RUNNING else "incomplete"))
        return out

    def _event(self, kind: str, **fields) -> Event:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return kind, payload

    def _response(self) -> dict:
        return self.envelope | {"output": list(self.output)}

    def start(self) -> list[Event]:
        return self.opening

    # --- items -----------------------------------------------------------------------------------------------
    def _where(self) -> dict:
        assert self.open is not None
        return {"item_id": self.open["id"], "output_index": len(self.output)}

    def _open(self, prefix: str, make) -> list[Event]:
        """Close the open item, then open `make(item id)` at the next output index."""
        events = self._close()
        item = make(self.items.id(prefix, len(self.output)))
        self.open, self.text, self.logprobs = item, "", []
        events.append(self._event("response.output_item.added", output_index=len(self.output), item=item))
        if item["type"] == "message":
            events.append(
                self._event("response.content_part.added", **self._where(), content_index=0, part=_text_part(""))
            )
        elif item["type"] == "reasoning":
            if self.summary:
                part = _summary_part("")
                events.append(
                    self._event("response.reasoning_summary_part.added", **self._where(), summary_index=0, part=part)
                )
            part = {"type": "reasoning_text", "text": ""}
            events.append(self._event("response.content_part.added", **self._where(), content_index=0, part=part))
        return events

    def _whole(self, status: str) -> dict:
        """The open item with its text so far."""
        item, text = self.open, self.text
        assert item is not None
        if item["type"] == "message":
            return _message_item(item["id"], text, status, self.logprobs)
        if item["type"] == "reasoning":
            return _reasoning_item(item["id"], text, status, self.summary)
        return _call_item(item["id"], item["call_id"], item["name"], text, status)

    def _close(self, status: str = "completed") -> list[Event]:
        item = self.open
        if item is None:
            return []
        where, text, events = self._where(), self.text, []
        if item["type"] == "message":
            logprobs = self.logprobs
            events.append(
                self._event("response.output_text.done", **where, content_index=0, text=text, logprobs=logprobs)
            )
            part = _text_part(text, logprobs)
            events.append(self._event("response.content_part.done", **where, content_index=0, part=part))
        elif item["type"] == "reasoning":
            if self.summary:
                events.append(self._event("response.reasoning_summary_text.done", **where, summary_index=0, text=text))
                part = _summary_part(text)
                events.append(self._event("response.reasoning_summary_part.done", **where, summary_index=0, part=part))
            part = {"type": "reasoning_text", "text": text}
            events.append(self._event("response.reasoning_text.done", **where, content_index=0, text=text))
            events.append(self._event("response.content_part.done", **where, content_index=0, part=part))
        else:
            events.append(
                self._event("response.function_call_arguments.done", **where, name=item["name"], arguments=text)
            )
        done = self._whole(status)
        events.append(self._event("response.output_item.done", output_index=where["output_index"], item=done))
        self.output.append(done)
        self.open = None
        return events

    def chunk(self, chunk: derender_pb2.ChatCompletionChunk) -> list[Event]:
        if chunk.HasField("usage"):
            self.usage = chunk.usage
        events: list[Event] = []
        for choice in chunk.choices[:1]:  # one answer (the Responses API has no n)
            self.token_ids += choice.token_ids
            delta = choice.delta
            if delta.HasField("reasoning") and delta.reasoning:
                if self.open is None or self.open["type"] != "reasoning":
                    events += self._open("rs", _opened_reasoning)
                self.text += delta.reasoning
                where = self._where()
                if self.summary:
                    events.append(
                        self._event(
                            "response.reasoning_summary_text.delta", **where, summary_index=0, delta=delta.reasoning
                        )
                    )
                events.append(
                    self._event("response.reasoning_text.delta", **where, content_index=0, delta=delta.reasoning)
                )
            if delta.HasField("content") and delta.content:
                if self.open is None or self.open["type"] != "message":
                    events += self._open("msg", lambda i: _message_item(i, None, "in_progress"))
                self.text += delta.content
                alone = not (delta.HasField("reasoning") and delta.reasoning) and not delta.tool_calls
                logprobs = text_logprobs(choice.logprobs, delta.content, alone)
                self.logprobs += logprobs
                where = self._where()
                events.append(
                    self._event(
                        "response.output_text.delta", **where, content_index=0, delta=delta.content, logprobs=logprobs
                    )
                )
            for call in delta.tool_calls:
                if call.HasField("id") or call.index not in self.calls:
                    name = call.function.name
                    events += self._open("fc", lambda i, c=call.id, n=name: _call_item(i, c, n, "", "in_progress"))
                    self.calls[call.index] = len(self.output)
                if call.function.arguments:
                    self.text += call.function.arguments
                    where = self._where()
                    events.append(
                        self._event("response.function_call_arguments.delta", **where, delta=call.function.arguments)
                    )
            if choice.HasField("finish_reason"):
                self.choice = choice
        return events

    def generated(self, outputs: list[engine_pb2.GenerateResponse]) -> None:
        """The engine's outputs, just before `finish` (shaped_route.ReadsOutputs)."""
        self.outputs = outputs

    def finish(self) -> list[Event]:
        events = self._close(_status(self.choice)[0])  # `incomplete`: the open item was cut short
        final = _finished(self._response(), self.choice, self.usage)
        if "prompt_token_ids" in final:
            final["token_ids"] = self.token_ids
        if self.metrics:
            final = timed(final, self.outputs)
        if self.keep is not None:
            self.keep(final)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return events + [self._event(kind, response=final)]

    def notice(self, failure: ServiceError) -> list[Event]:
        """The `error` event alone (its `code` the stable reason)."""
        error = error_object(failure)["error"]
        return [self._event("error", code=error["code"], message=error["message"], param=error["param"])]

    def error(self, failure: ServiceError) -> list[Event]:
        """`error` (its `code` the stable reason), then `response.failed` ending the response's lifecycle: the
        output so far (an item cut short is `incomplete`) and `error.code` one of the API's own codes."""
        events = self.notice(failure)
        failed = self.snapshot("failed")
        code = "rate_limit_exceeded" if HTTP_STATUS.get(failure.code) == 429 else "server_error"
        failed["error"] = {"code": code, "message": failure.message}
        return events + [self._event("response.failed", response=failed)]
