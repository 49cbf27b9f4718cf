"""SGLang's `POST /generate` as a face over the completion path (sglang_server.proto, SGLangServerService.Generate).

Each prompt of the body (sglang_request.py: the field tables and SGLang's batch rules) is rendered as a typed
completion (`text` tokenized by render; `input_ids` checked against the vocabulary there), then generated and
derendered live (`hops.LiveGeneration`: the engine's stream through derender's, a matched stop string cancelling
the engine), every prompt at once. The answers are SGLang's (sglang_output.py): unary, one JSON object for one
prompt, else a list, prompt-major (`n` answers per prompt); streamed, one `data: {json}` event per answer that
advanced, its whole text, output_ids and logprobs so far (SGLang's default, non-incremental streaming), with
`index` (its place in that list) on a batch's events, and `data: [DONE]` last.

Errors are SGLang's shape as far as its clients read it: `{"error": {"message": ...}}` with the HTTP status (the
gateway's error object, which adds `type`, `param` naming the client's field, and `code`, the stable reason). A
render or engine error names the client's SGLang field (`sampling_params.max_new_tokens`, `input_ids`), not the
typed request's. Before the first event an error is the HTTP answer; after it, an in-band `data: {"error": ...}`
event and `data: [DONE]`, as SGLang's stream does. A client that goes away cancels every engine call.

Prompt logprobs (`top_logprobs_num` alternatives from `logprob_start_len`) are bounded as on the OpenAI routes
(scaleout_common/prompt_logprob_rules.py): render refuses up front what derender's message cannot carry, a hop's
RESOURCE_EXHAUSTED past that count is the same 400 naming `top_logprobs_num` (never a 429, "retry later"), and a
unary answer and each streamed event go in pieces (answer_pieces.py; the transcoder writes the same bytes), so the
JSON, which repeats them whole in every event, has no bound of its own.
"""

from __future__ import annotations

import asyncio
import re
import time

import grpc
from google.api import httpbody_pb2

from pipeline_svc.answer_pieces import pieces
from pipeline_svc.client_fields import named
from pipeline_svc.faces.sglang_output import PromptRun, TokenTexts
from pipeline_svc.faces.sglang_request import RENDER_FIELDS, GenerateBody, parse
from pipeline_svc.hops import Hops, LiveGeneration, broken_off
from pipeline_svc.openai_service import DONE, data_event, merged
from pipeline_svc.shaped_route import json_body
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.openai_errors import error_object
from scaleout_common.prompt_logprob_rules import asked, oversized

# Where an engine error's structured-output constraint came from, in SGLang's body (client_fields.named).
CONSTRAINTS = tuple(f"sampling_params.{name}" for name in ("json_schema", "regex", "ebnf", "structural_tag"))
PROMPT_FIELD = re.compile(r"\b(prompts|prompt_token_ids)\[0\](\.token_ids)?")
WORDS = {
    "'max_tokens'": "'max_new_tokens'",
    "min_tokens": "min_new_tokens",
    "logprobs must": "top_logprobs_num must",
    "prompt_logprobs of": "top_logprobs_num of",  # prompt_logprob_rules' refusal of an answer that cannot fit
}
TOP = "top_logprobs_num"  # the count of prompt logprobs (with return_logprob and logprob_start_len >= 0)


def _in_sglang_terms(error: ServiceError, body: GenerateBody, index: int) -> ServiceError:
    """A render error about prompt `index` naming the SGLang field it came from, in its path and its words."""
    prompt = "text" if body.data.get("text") is not None else "input_ids"
    prompt = prompt if body.single else f"{prompt}[{index}]"

    def words(text: str) -> str:
        for typed, sglang in WORDS.items():
            text = text.replace(typed, sglang)
        return PROMPT_FIELD.sub(prompt, text)

    renamed = []
    for field, why in error.violations:
        top = field.split(".")[0].split("[")[0]
        if not PROMPT_FIELD.match(field) and top in RENDER_FIELDS:
            field = RENDER_FIELDS[top] + field[len(top) :]
        renamed.append((words(field), words(why)))
    error.message, error.violations = words(error.message), renamed
    return error


class SGLangGenerate:
    def __init__(self, hops: Hops):
        self.hops = hops

    async def __call__(self, request: httpbody_pb2.HttpBody, context):
        async for event in named(self._generate(request, context), request.data, CONSTRAINTS):
            yield event

    async def _render(self, body: GenerateBody, index: int, context) -> render_pb2.RenderedCompletion:
        try:
            rendered = await self.hops.render.RenderCompletion(
                body.prompts[index].typed, timeout=context.time_remaining()
            )
        except grpc.aio.AioRpcError as error:
            raise _in_sglang_terms(ServiceError.from_rpc_error(error), body, index) from None
        return rendered.prompts[0]

    async def _generate(self, request, context):
        started = time.monotonic()
        body = parse(request.data)
        rendered = await asyncio.gather(*(self._render(body, i, context) for i in range(len(body.prompts))))
        runs = [PromptRun(prompt, r, started) for prompt, r in zip(body.prompts, rendered)]
        lives = [LiveGeneration(self.hops, r, context) for r in rendered]
        texts = TokenTexts(self.hops.render, body.text_in_logprobs, context)
        flat = [answer for run in runs for answer in run.answers]
        top = asked(*(prompt.typed for prompt in body.prompts))
        if not body.stream:
            try:
                async for index, answer in merged(lives):
                    _feed(runs[index], lives[index], answer)
            except (grpc.aio.AioRpcError, ServiceError) as error:
                raise oversized(ServiceError.of(error), top, TOP) from None
            if texts.wanted:
                await texts.fetch(set().union(*(run.ids_to_name() for run in runs)))
            outputs = [a.json(texts, body.prompt_ids) for a in flat]
            for piece in pieces(json_body(outputs[0] if body.single else outputs)):  # prompt logprobs may be large
                yield piece
            return
        started_stream = False
        try:
            async for index, answer in merged(lives):
                run = runs[index]
                for choice in _feed(run, lives[index], answer):
                    if texts.wanted:
                        await texts.fetch(run.ids_to_name())
                    event = run.answers[choice].json(texts, body.prompt_ids)
                    if not body.single:
                        event["index"] = flat.index(run.answers[choice])
                    started_stream = True
                    for piece in pieces(data_event(event)):  # each event carries the prompt logprobs whole
                        yield piece
        except (grpc.aio.AioRpcError, ServiceError) as error:
            error = oversized(ServiceError.of(error), top, TOP)  # a hop's message too large for them: a 400
            if not started_stream:
                raise error from None
            yield data_event(error_object(broken_off(error)))  # HTTP/1.1 clients never see trailers
        yield DONE


def _feed(run: PromptRun, live: LiveGeneration, answer) -> list[int]:
    """One derender answer into its prompt's answers; the indexes of those it advanced."""
    run.engine(live.outputs)
    advanced = []
    for choice in answer.completion.choices:
        if choice.index < len(run.answers):
            run.answers[choice.index].feed(choice)
            advanced.append(choice.index)
    return advanced
