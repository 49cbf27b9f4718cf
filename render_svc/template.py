"""A chat template that renders exactly as transformers' apply_chat_template(tokenize=False).

Templates compile once (cached by source) in transformers' sandboxed Jinja environment; rendering follows
transformers' `render_jinja_template` step by step (reasoning-field aliases, the continue_final_message tag, the
special tokens as variables) without its per-call copies, since our inputs are already plain JSON data. The
output is capped at `max_chars` on every path (counted piece by piece).

The server's own templates (the model's, --chat-template) are trusted and render here, in-process. A request's
`chat_template` is not: it compiles and renders only in the sandbox's worker processes (render_svc/sandbox.py),
which run this same code under memory, CPU and wall-clock limits.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

import jinja2
from jinja2 import nodes
from transformers.utils.chat_template_utils import _compile_jinja_template

from render_svc.prompt import Limits
from render_svc.sandbox import SandboxPool
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _typed(function, *args):
    """`function(*args)`, with whatever it raises turned into a typed error."""
    try:
        return function(*args)
    except ServiceError:
        raise
    except MemoryError:
        raise fail(Reason.TEMPLATE_OUTPUT_TOO_LARGE, "the template used too much memory") from None
    except Exception as error:
        raise fail(Reason.TEMPLATE_ERROR, f"chat template failed: {type(error).__name__}: {error}") from None


def _loops_over_content(tree: nodes.Template) -> bool:
    """vLLM's content-format detection: does the template iterate over a message's `content`?"""

    def is_content(node) -> bool:
        return (isinstance(node, nodes.Getattr) and node.attr == "content") or (
            isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and node.arg.value == "content"
        )

    aliases = {
        assign.target.name
        for assign in tree.find_all(nodes.Assign)
        if isinstance(assign.target, nodes.Name) and is_content(assign.node)
    }
    for loop in tree.find_all(nodes.For):
        target = loop.iter.node if isinstance(loop.iter, nodes.Filter) else loop.iter
        if is_content(target) or (isinstance(target, nodes.Name) and target.name in aliases):
            return True
    return False


def _alias_reasoning(message: dict) -> dict:
    reasoning = next((message[key] for key in _REASONING_FIELDS if message.get(key) is not None), None)
    if reasoning is None:
        return message
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


def _tag_final_message(chat: list[dict], source: str) -> str:
    """Mark the end of the final message's content; returns the text to find again in the output."""
    final = chat[-1].get("content")
    if final is None or "content" not in source:
        raise fail(
            Reason.TEMPLATE_ERROR, "continue_final_message: the final message has no content the template renders"
        )
    if isinstance(final, list):
        parts = [dict(part) for part in final]
        for part in reversed(parts):
            if "text" in part:
                final, part["text"] = part["text"], part["text"] + _CONTINUE_TAG
                break
        else:
            raise fail(Reason.TEMPLATE_ERROR, "continue_final_message: the final message has no text to continue")
        chat[-1] = {**chat[-1], "content": parts}
    else:
        chat[-1] = {**chat[-1], "content": final + _CONTINUE_TAG}
    return final


def _cut_at_tag(text: str, final: str) -> str:
    if final.strip() not in text or _CONTINUE_TAG.strip() not in text:
        raise fail(
            Reason.TEMPLATE_ERROR, "continue_final_message: the template does not render the final message as given"
        )
    at = text.rindex(_CONTINUE_TAG.strip())
    return text[:at] if text[at : at + len(_CONTINUE_TAG)] == _CONTINUE_TAG else text[:at].rstrip()


class Template(Protocol):
    """A template the renderer can use: compiled here (`ChatTemplate`) or in the sandbox (`RequestTemplate`)."""

    source: str
    openai_content: bool  # does it loop over a message's content (vLLM's content-format detection)

    def render(
        self, messages, tools, documents, add_generation_prompt: bool, continue_final_message: bool, variables: dict
    ) -> str: ...


class ChatTemplate:
    """One template compiled in this process."""

    def __init__(self, source: str, env: jinja2.Environment, max_chars: int):
        self.source, self.max_chars = source, max_chars
        try:
            self.template = env.from_string(source)
            self._globals = dict(self.template.globals)
            self.openai_content = _loops_over_content(env.parse(source))
        except jinja2.TemplateError as error:
            raise fail(Reason.TEMPLATE_ERROR, f"chat template does not compile: {error}", "chat_template") from None

    def render(
        self, messages, tools, documents, add_generation_prompt: bool, continue_final_message: bool, variables: dict
    ) -> str:
        return _typed(
            self._render, messages, tools, documents, add_generation_prompt, continue_final_message, variables
        )

    def _render(self, messages, tools, documents, add_generation_prompt, continue_final_message, variables) -> str:
        chat = [_alias_reasoning(m) for m in messages]
        final = _tag_final_message(chat, self.source) if continue_final_message else None
        # Template.new_context, without re-reading the (static) globals ChainMap on every render.
        template = self.template
        context = template.environment.context_class(
            template.environment,
            {
                **self._globals,
                **variables,
                "messages": chat,
                "tools": tools,
                "documents": documents,
                "add_generation_prompt": add_generation_prompt,
            },
            template.name,
            template.blocks,
            globals=self._globals,
        )
        pieces, size = [], 0
        for piece in template.root_render_func(context):
            size += len(piece)
            if size > self.max_chars:
                raise fail(
                    Reason.TEMPLATE_OUTPUT_TOO_LARGE, f"the template rendered more than {self.max_chars} characters"
                )
            pieces.append(piece)
        text = "".join(pieces)
        return _cut_at_tag(text, final) if final is not None else text


class RequestTemplate:
    """A request's template: compiled and rendered by the sandbox's workers only."""

    def __init__(self, source: str, sandbox: SandboxPool):
        self.source, self.sandbox = source, sandbox
        self.openai_content = sandbox.call(["compile", source])

    def render(
        self, messages, tools, documents, add_generation_prompt: bool, continue_final_message: bool, variables: dict
    ) -> str:
        call = ["render", self.source, messages, tools, documents, add_generation_prompt, continue_final_message]
        return self.sandbox.call([*call, variables])


def _sandboxed(limits: Limits) -> Callable[[list], object]:
    """A sandbox worker's handler: a RequestTemplate's calls, answered with this process's own templates."""
    templates = TemplateRenderer(limits)

    def handle(call: list):
        kind, source, *args = call
        template = templates.compiled(source)
        return template.openai_content if kind == "compile" else template.render(*args)

    return handle


class TemplateRenderer:
    """Templates by source (LRU caches): the server's compiled here, a request's in the sandbox."""

    def __init__(self, limits: Limits, cache_size: int = 32):
        self.max_chars = limits.max_template_output_chars
        # transformers' own chat-template environment (sandboxed; its globals, filters and extensions)
        self._env = _compile_jinja_template("").environment
        self.sandbox = SandboxPool(
            functools.partial(_sandboxed, limits),
            preload=__name__,
            workers=limits.template_workers,
            timeout_s=limits.template_timeout_s,
            memory_mb=limits.template_memory_mb,
            max_reply_bytes=12 * self.max_chars + 4096,  # JSON escapes a character in at most 12 bytes
        )
        self._compiled: OrderedDict[str, ChatTemplate] = OrderedDict()
        self._requested: OrderedDict[str, RequestTemplate] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def compiled(self, source: str) -> ChatTemplate:
        """A trusted template (the server's), compiled in this process."""
        return self._cached(self._compiled, source, lambda: _typed(ChatTemplate, source, self._env, self.max_chars))

    def requested(self, source: str) -> RequestTemplate:
        """A request's template: the sandbox compiles it (and says whether it does) before it is cached."""
        return self._cached(self._requested, source, lambda: RequestTemplate(source, self.sandbox))

    def _cached(self, cache: OrderedDict, source: str, make: Callable):
        """The cached template of `source`, else `make()` (thread-safe; making one never holds the lock)."""
        with self._lock:
            template = cache.get(source)
            if template is not None:
                cache.move_to_end(source)
                return template
        template = make()
        with self._lock:
            cache[source] = template
            if len(cache) > self._cache_size:
                cache.popitem(last=False)
        return template

    def render(
        self,
        template: Template,
        messages,
        tools=None,
        documents=None,
        *,
        add_generation_prompt=True,
        continue_final_message=False,
        variables=None,
    ) -> str:
        return template.render(
            messages, tools, documents, add_generation_prompt, continue_final_message, variables or {}
        )

    def close(self) -> None:
        self.sandbox.close()
