"""Chat rendering: RenderChatRequest -> RenderChatResponse (GenerateRequest + DerenderContext), one or many.

Each conversation goes through prepare (validate, convert) -> text (chat template) -> ids (tokenizer) -> finish
(truncate, limits, sampling, context). A batch renders every text first, then tokenizes them in one batch call.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from render_svc import context, convert, errors, roles, routing, structured
from render_svc.model import Model
from render_svc.prompt import (
    Limits,
    Options,
    check_length,
    check_size,
    check_truncation,
    fill_generate_request,
    offsets_proto,
    truncate,
)
from render_svc.template import Template, TemplateRenderer
from scaleout.v1 import common_pb2, derender_pb2, render_pb2
from scaleout_common import format_detect, sampling_rules
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

# Template variables a caller may not set through chat_template_kwargs: they have their own fields.
RESERVED_TEMPLATE_KWARGS = frozenset(
    {
        "chat_template",
        "tokenize",
        "messages",
        "conversation",
        "tools",
        "documents",
        "add_generation_prompt",
        "continue_final_message",
    }
)


@dataclass
class ChatJob:
    """A validated chat request, ready to render."""

    request: render_pb2.RenderChatRequest
    messages: list[dict]
    tools: list[dict] | None
    tool_mode: derender_pb2.ToolChoiceMode
    tool_function: str
    template: Template
    template_kwargs: dict  # server defaults merged with the request's
    add_generation_prompt: bool
    add_special_tokens: bool
    keep: int | None  # truncate_prompt_tokens, resolved
    constraint: common_pb2.StructuredOutputs | None = None  # structured outputs (render_svc/structured.py)


class Renderer:
    def __init__(self, model: Model, limits: Limits | None = None, options: Options | None = None):
        self.model = model
        self.limits = limits = limits or Limits()
        self.options = options or Options()
        model.tokens.use_cache(self.options.token_cache_mb)
        self.templates = TemplateRenderer(limits)
        self.model_limits = sampling_rules.ModelLimits(
            model.max_model_len,
            model.tokens.vocab_size,
            max_logprobs=sampling_rules.whole_vocab_cap(limits.max_logprobs, model.tokens.vocab_size),
            defaults=model.generation_defaults,
            max_message_bytes=limits.max_message_bytes,
        )
        self.max_prompt_tokens = min(limits.max_prompt_tokens or model.max_model_len, model.max_model_len)
        self.special_tokens = {k: v for k, v in model.tokenizer.special_tokens_map.items() if isinstance(v, str)}
        self._default_sources: dict[bool, str | None] = {}
        self.reasoning = structured.Reasoning(model.tokenizer, self.options.reasoning_parser)
        # the tool-call format the output is parsed in (derender's default when --tool-parser is unset)
        template = getattr(model.tokenizer, "chat_template", None)
        self.tool_format = self.options.tool_parser or format_detect.tool_parser_for(template)
        # LoRA adapters by the name a request's `model` selects them with (vLLM's: served names, then adapters)
        self.loras = {module.name: module for module in self.options.lora_modules}

    # --- shared checks -------------------------------------------------------------------------------------
    def check_model(self, name: str, adapters: bool = True) -> str:
        """The LoRA adapter `name` selects ("": the base model, also for no name); MODEL_NOT_FOUND for a name that
        is neither a served one nor (where `adapters`) an adapter's."""
        if not name or name in self.model.names:
            return ""
        if adapters and name in self.loras:
            return name
        raise errors.model_not_found(name, self.model.names + (list(self.loras) if adapters else []))

    def identity(self, prefix: str, request_id: str, adapter: str = "") -> context.Identity:
        """`prefix` is joined with "-" ("chatcmpl-..."), unless it ends with "_" (Anthropic's "msg_..."). The
        answer names the adapter that ran, as vLLM's does, else the served model."""
        separator = "" if prefix.endswith("_") else "-"
        return context.Identity(
            id=f"{prefix}{separator}{request_id or os.urandom(16).hex()}",
            created=int(time.time()),
            model=adapter or self.model.name,
            fingerprint=self.model.fingerprint,
            reasoning_parser=self.options.reasoning_parser,
            tool_parser=self.options.tool_parser,
        )

    def _template_source(self, with_tools: bool) -> str:
        if with_tools not in self._default_sources:
            try:
                source = self.model.tokenizer.get_chat_template(None, [{}] if with_tools else None)
            except ValueError:
                source = None
            self._default_sources[with_tools] = source
        source = self._default_sources[with_tools]
        if source is None:
            raise fail(Reason.NO_CHAT_TEMPLATE, "the model has no chat template; pass --chat-template")
        return source

    def template(self, request: render_pb2.RenderChatRequest, with_tools: bool) -> Template:
        """The server's template, or the request's (which renders in the sandbox's worker processes)."""
        if not request.HasField("chat_template"):
            return self.templates.compiled(self._template_source(with_tools))
        if not self.options.trust_request_chat_template:
            raise fail(
                Reason.CHAT_TEMPLATE_NOT_TRUSTED,
                "this server refuses request chat templates (start it with --trust-request-chat-template)",
            )
        return self.templates.requested(request.chat_template)

    def openai_content(self, template: Template) -> bool:
        content_format = self.options.content_format
        return template.openai_content if content_format == "auto" else content_format == "openai"

    # --- chat ----------------------------------------------------------------------------------------------
    def prepare(self, request: render_pb2.RenderChatRequest) -> ChatJob:
        self.check_model(request.model)
        check_size(request, self.limits.max_request_bytes)
        if len(request.messages) > self.limits.max_messages:
            raise fail(
                Reason.TOO_MANY_MESSAGES,
                f"{len(request.messages)} messages, more than the limit of {self.limits.max_messages}",
                "messages",
            )
        add_generation_prompt = request.add_generation_prompt if request.HasField("add_generation_prompt") else True
        if request.continue_final_message and add_generation_prompt:
            raise fail(
                Reason.CONFLICTING_OPTIONS,
                "continue_final_message continues the last message; add_generation_prompt starts a new one: set "
                "add_generation_prompt=false",
                "continue_final_message",
            )
        keep = check_truncation(request, self.model.max_model_len)
        if request.prompt_token_ids and request.return_token_offsets:
            raise fail(
                Reason.CONFLICTING_OPTIONS,
                "return_token_offsets maps the rendered text's tokens; prompt_token_ids are sent, not rendered",
                "return_token_offsets",
            )
        tools = convert.tools(request.tools)
        tool_mode, tool_function = convert.tool_choice(request.tool_choice, tools)
        request_kwargs = convert.struct_to_py(request.chat_template_kwargs)
        reserved = RESERVED_TEMPLATE_KWARGS & request_kwargs.keys()
        if reserved:
            raise fail(
                Reason.RESERVED_TEMPLATE_KWARG,
                f"chat_template_kwargs may not set {sorted(reserved)}",
                "chat_template_kwargs",
            )
        template = self.template(request, bool(tools))
        return ChatJob(
            request=request,
            messages=roles.developer_as_system(
                convert.chat_messages(request.messages, self.openai_content(template)), template.source
            ),
            tools=tools,
            tool_mode=tool_mode,
            tool_function=tool_function,
            template=template,
            template_kwargs={**self.options.default_template_kwargs, **request_kwargs},
            add_generation_prompt=add_generation_prompt,
            add_special_tokens=request.add_special_tokens if request.HasField("add_special_tokens") else False,
            keep=keep,
            constraint=structured.constraint(request, tools, tool_mode, tool_function, self.tool_format),
        )

    def text(self, job: ChatJob) -> str:
        if job.request.prompt_token_ids:  # a decode step's forwarded prompt: the text its ids mean
            return self.model.tokens.decode(job.request.prompt_token_ids, skip_special_tokens=False)
        documents = [convert.struct_to_py(d) for d in job.request.documents] or None
        text = self.templates.render(
            job.template,
            job.messages,
            job.tools,
            documents,
            add_generation_prompt=job.add_generation_prompt,
            continue_final_message=job.request.continue_final_message,
            variables={**self.special_tokens, **job.template_kwargs},
        )
        roles.check_rendered([m.role for m in job.request.messages], job.messages, text)
        return text

    def encode(self, jobs: list[ChatJob], texts: list[str]) -> list[tuple[list[int], list | None, int | None]]:
        """Token ids, offsets where asked, and how many of the ids make the first turn (the routing key's,
        render_svc/routing.py; None when the key does not need it) of every text, from one tokenization of each,
        in as few batch calls as the options allow."""
        out: list = [None] * len(texts)
        groups: dict[tuple[bool, bool], list[int]] = {}
        for i, job in enumerate(jobs):
            if job.request.prompt_token_ids:  # sent, not rendered: checked in `finish`
                out[i] = (list(job.request.prompt_token_ids), None, None)
                continue
            groups.setdefault((job.add_special_tokens, job.request.return_token_offsets), []).append(i)
        for (special, offsets), members in groups.items():
            batch = [texts[i] for i in members]
            cuts = [
                None if jobs[i].request.prompt_cache_key else routing.first_turn_end(jobs[i].messages, texts[i])
                for i in members
            ]
            for i, result in zip(members, self.model.tokens.encode_cut(batch, cuts, special, offsets)):
                out[i] = result
        return out

    def finish(
        self, job: ChatJob, text: str, ids: list[int], offsets, id_prefix: str = "chatcmpl"
    ) -> render_pb2.RenderChatResponse:
        request = job.request
        if request.prompt_token_ids:  # a batch's error names its conversation (render_chat_batch)
            sampling_rules.check_token_ids(ids, self.model.tokens.vocab_size, "prompt_token_ids")
        ids, offsets = truncate(ids, offsets, job.keep, request.truncation_side)
        check_length(ids, self.max_prompt_tokens, "messages")
        params = sampling_rules.resolve(request, len(ids), self.model_limits, chat=True, prompt_field="messages")
        structured.apply(params, job.constraint, request, self.model.tokenizer, self.reasoning, text)
        adapter = self.check_model(request.model)
        identity = self.identity(id_prefix, request.request_id, adapter)
        n = request.n if request.HasField("n") else 1
        # echo: the last message's text, when the answer continues it (vLLM: its role is the answer's role)
        last = job.messages[-1]
        echoed = last["role"] == "assistant" or not job.add_generation_prompt
        echo_text = _content_text(last["content"]) if echoed else ""
        response = render_pb2.RenderChatResponse()
        fill_generate_request(
            response.generate_request,
            request,
            request.request_id or identity.id,
            ids,
            params,
            n,
            self.model.name,
            self.model.fingerprint,
            adapter,
        )
        derender = response.derender_context
        context.fill(
            derender,
            request,
            identity,
            derender_pb2.ENDPOINT_CHAT,
            ids,
            text,
            n,
            params.logprobs if params.HasField("logprobs") else None,
            echo_text,
            prompt_logprobs=params.prompt_logprobs if params.HasField("prompt_logprobs") else None,
        )
        context.add_chat_fields(derender, request, job.tool_mode, job.tool_function, job.template_kwargs)
        if request.return_prompt_text:
            response.prompt_text = text
        if offsets is not None:
            response.token_offsets.extend(offsets_proto(offsets))
        return response

    def render_chat(
        self,
        request: render_pb2.RenderChatRequest,
        id_prefix: str = "chatcmpl",
        check_prompt: Callable[[list[int]], None] | None = None,
    ) -> render_pb2.RenderChatResponse:
        """`id_prefix` names the response id for the API the request came from ("msg_", "resp_"); `check_prompt`
        sees the prompt's token ids before the shared limits do (an API's own wording of them)."""
        job = self.prepare(request)
        text = self.text(job)
        [(ids, offsets, first_turn)] = self.encode([job], [text])
        if check_prompt is not None:
            check_prompt(ids)
        response = self.finish(job, text, ids, offsets, id_prefix)
        response.generate_request.prefix_hash = routing.chat_prefix_hash(request, ids, first_turn)
        return response

    def render_chat_batch(self, request: render_pb2.RenderChatBatchRequest) -> render_pb2.RenderChatBatchResponse:
        if len(request.requests) > self.limits.max_batch_size:
            raise fail(
                Reason.TOO_MANY_REQUESTS,
                f"{len(request.requests)} conversations, more than the limit of {self.limits.max_batch_size}",
                "requests",
            )
        jobs, texts = [], []
        for i, item in enumerate(request.requests):
            try:
                job = self.prepare(item)
                texts.append(self.text(job))
            except ServiceError as error:
                raise errors.in_batch(error, i) from None
            jobs.append(job)
        encoded = self.encode(jobs, texts)
        responses = []
        for i, (job, text, (ids, offsets, first_turn)) in enumerate(zip(jobs, texts, encoded)):
            try:
                responses.append(self.finish(job, text, ids, offsets))
                responses[-1].generate_request.prefix_hash = routing.chat_prefix_hash(job.request, ids, first_turn)
            except ServiceError as error:
                raise errors.in_batch(error, i) from None
        return render_pb2.RenderChatBatchResponse(responses=responses)


def _content_text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content)
