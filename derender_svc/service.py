"""DerenderService: thin gRPC layer over Session (unary, stateful bidi stream, stateless twin)."""

from __future__ import annotations

import asyncio
import logging

from derender_svc import builders
from derender_svc import telemetry as _telemetry  # noqa: F401  (registers the readers of derender's messages)
from derender_svc.limits import Limits
from derender_svc.parsers import NONE
from derender_svc.reasoning_check import check_reasoning
from derender_svc.session import Defaults, Session
from derender_svc.state_codec import decode_state, encode_state
from derender_svc.tokenizer_info import TokenizerInfo
from scaleout.v1 import derender_pb2, derender_pb2_grpc, engine_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.models import load_tokenizer, model_name, resolve_model
from scaleout_common.reasons import Reason, fail
from scaleout_common.response_templates import NAMES as TEMPLATE_PARSERS

log = logging.getLogger(__name__)


class DerenderService(derender_pb2_grpc.DerenderServiceServicer):
    service_names = (derender_pb2.DESCRIPTOR.services_by_name["DerenderService"].full_name,)

    def __init__(self, args, info: TokenizerInfo | None = None):
        self.args = args
        self.defaults: Defaults | None = None
        self._info = info  # tests and benches may hand in a loaded tokenizer
        self.active_streams = 0  # open DerenderStream calls (for metrics)

    def register(self, server) -> None:
        derender_pb2_grpc.add_DerenderServiceServicer_to_server(self, server)

    async def load(self) -> None:
        info = self._info
        if info is None:
            folder = resolve_model(self.args.model)
            tokenizer = await asyncio.to_thread(
                load_tokenizer, folder, self.args.trust_remote_code, self.args.chat_template
            )
            info = await asyncio.to_thread(TokenizerInfo.from_hf, tokenizer)
            log.info("derendering for %s (vocab %d)", model_name(folder), info.vocab_size)
        reasoning = self.args.reasoning_parser
        if reasoning == "auto":  # the chat template's format, else think where the vocabulary has its tags
            reasoning = info.reasoning_format
            if reasoning == NONE and info.has_think_tokens:
                reasoning = "think"
        tool = info.tool_format if self.args.tool_parser == "auto" else self.args.tool_parser
        for flag, name in (("--reasoning-parser", reasoning), ("--tool-parser", tool)):
            if name in TEMPLATE_PARSERS and info.response_template is None:
                raise SystemExit(f"{flag} {name} reads the model's response_template: {info.template_problem}")
        self.defaults = Defaults(info, Limits.from_args(self.args), reasoning, tool)

    @property
    def _defaults(self) -> Defaults:
        """The defaults `load()` built (calls are refused as NOT_READY until it has returned)."""
        assert self.defaults is not None, "DerenderService called before load()"
        return self.defaults

    async def drain(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def DerenderChat(self, request, context):
        session = Session(
            request.context,
            self._defaults,
            derender_pb2.ENDPOINT_CHAT,
            None,
            request.HasField("context"),
            streamed=False,
        )
        totals = await asyncio.to_thread(_run, session, request.results)  # the event loop keeps serving streams
        return builders.chat_completion(session.meta, totals, session.usage(), session.prompt_logprobs)

    async def DerenderCompletion(self, request, context):
        if not request.prompts:
            raise fail(Reason.MISSING_CONTEXT, "at least one prompt result is required", "prompts")
        limit = self._defaults.limits.max_choices
        if sum(max(p.context.n, 1) for p in request.prompts) > limit:
            raise fail(Reason.TOO_MANY_CHOICES, f"prompts times n is at most {limit}", "prompts")
        out = None
        for position, prompt in enumerate(request.prompts):
            session = Session(
                prompt.context,
                self._defaults,
                derender_pb2.ENDPOINT_COMPLETION,
                None,
                prompt.HasField("context"),
                streamed=False,
            )
            totals = await asyncio.to_thread(_run, session, prompt.results)
            base = (prompt.context.prompt_index or position) * max(prompt.context.n, 1)
            part = session.completion(totals, session.usage(), base)
            if out is None:
                out = part
            else:
                out.choices.extend(part.choices)
                for field in ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"):
                    setattr(out.usage, field, getattr(out.usage, field) + getattr(part.usage, field))
                if part.usage.HasField("completion_tokens_details"):
                    details = out.usage.completion_tokens_details
                    details.reasoning_tokens += part.usage.completion_tokens_details.reasoning_tokens
        return out

    async def DerenderStream(self, request_iterator, context):
        if self.active_streams >= self._defaults.limits.max_streams:
            raise fail(Reason.TOO_MANY_STREAMS, f"{self.active_streams} derender streams are open; retry")
        # The answer starts now, not with the first chunk: the one-hop service writes nothing until the engine's
        # first token, and the gateway ends a request whose answer has not started within its request_timeout.
        await context.send_initial_metadata(())
        session = None
        self.active_streams += 1
        try:
            async for request in request_iterator:
                if session is None:
                    if request.WhichOneof("message") != "context":
                        raise fail(
                            Reason.MISSING_CONTEXT, "the stream's first message must carry the context", "context"
                        )
                    session = Session(request.context, self._defaults)
                    continue
                if request.WhichOneof("message") != "engine_output":
                    raise fail(Reason.DUPLICATE_CONTEXT, "only the first message carries the context", "context")
                response = _step(session, request.engine_output, derender_pb2.DerenderStreamResponse)
                if response is not None:
                    yield response
                if session.done:
                    return
            if session is not None:  # the caller stopped early (stop string, abort): close the choices, usage
                response = _step(
                    session, engine_pb2.GenerateResponse(finished=True), derender_pb2.DerenderStreamResponse
                )
                if response is not None:
                    yield response
        finally:
            self.active_streams -= 1

    async def DerenderChunk(self, request, context):
        limit = self._defaults.limits.max_state_bytes
        state = decode_state(request.state, limit)
        try:
            session = Session(request.context, self._defaults, 0, state, request.HasField("context"))
            response = _step(session, request.engine_output, derender_pb2.DerenderChunkResponse, always=True)
        except (LookupError, ArithmeticError, TypeError, ValueError, AttributeError) as error:
            if state is None:
                raise
            raise fail(Reason.INVALID_STATE, f"state does not fit this context: {error!r}", "state") from error
        assert response is not None  # always=True: _step answers every message
        response.state = encode_state(session.state(), limit)
        return response

    async def CheckReasoning(self, request, context):
        return check_reasoning(request, self._defaults)


def _run(session: Session, results) -> list:
    """Every engine message through one session; the deltas folded per choice (the one-shot result)."""
    per_choice: dict[int, list] = {}
    for message in results:
        for delta in session.feed(message):
            per_choice.setdefault(delta.index, []).append(delta)
        if message.HasField("error"):
            raise ServiceError.from_status(message.error)
    if not session.done:
        for delta in session.feed(engine_pb2.GenerateResponse(finished=True)):
            per_choice.setdefault(delta.index, []).append(delta)
    return [builders.accumulate(per_choice[i]) for i in sorted(per_choice)]


def _step(session: Session, message, response_type, always: bool = False):
    """One engine message -> one response (None when it shows nothing new); an in-band error ends it."""
    deltas = session.feed(message)
    chunk = session.chunk(deltas, final=session.done)
    if message.HasField("error"):
        chunk.error.CopyFrom(message.error)
    if not (always or chunk.choices or chunk.HasField("usage") or chunk.HasField("error")):
        return None
    field = "completion" if session.endpoint == derender_pb2.ENDPOINT_COMPLETION else "chat"
    response = response_type(stop_generation=session.stop_generation)
    getattr(response, field).CopyFrom(chunk)
    return response
