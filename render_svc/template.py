"""A compiled chat template that renders exactly as transformers' apply_chat_template(tokenize=False).

The template is compiled once (cached by source) in the guarded sandbox; rendering follows transformers'
`render_jinja_template` step by step (reasoning-field aliases, the continue_final_message tag, the special
tokens as variables) without its per-call copies, since our inputs are already plain JSON data.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import jinja2
from jinja2 import nodes
from transformers.utils.chat_template_utils import _compile_jinja_template

from render_svc.sandbox import WATCHDOG, GuardedEnvironment, TemplateTimeout, TemplateTooLarge, guard_filter
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _environment(max_chars: int) -> GuardedEnvironment:
    """transformers' chat-template environment (globals, filters, extensions), guarded."""
    base = _compile_jinja_template("").environment
    env = GuardedEnvironment(
        max_chars, trim_blocks=True, lstrip_blocks=True, extensions=[type(e) for e in base.extensions.values()]
    )
    env.globals.update(base.globals)
    env.filters.update({name: guard_filter(f, max_chars) for name, f in base.filters.items()})
    return env


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


class ChatTemplate:
    """One compiled template plus what the renderer needs to know about it."""

    def __init__(self, source: str, env: GuardedEnvironment):
        self.source = source
        try:
            self.template = env.from_string(source)
            self._globals = dict(self.template.globals)
            self.openai_content = _loops_over_content(env.parse(source))
        except jinja2.TemplateError as error:
            raise fail(Reason.TEMPLATE_ERROR, f"chat template does not compile: {error}", "chat_template") from None

    def render(
        self,
        messages,
        tools,
        documents,
        add_generation_prompt: bool,
        continue_final_message: bool,
        variables: dict,
        max_chars: int,
    ) -> str:
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
            if size > max_chars:
                raise TemplateTooLarge(f"the template rendered more than {max_chars} characters")
            pieces.append(piece)
        text = "".join(pieces)
        return _cut_at_tag(text, final) if final is not None else text


class TemplateRenderer:
    """Compiles templates once (LRU by source) and renders them under the size and time limits."""

    def __init__(self, max_chars: int, timeout_s: float, cache_size: int = 32):
        self.max_chars = max_chars
        self.timeout_s = timeout_s
        self._env = _environment(max_chars)
        self._cache: OrderedDict[str, ChatTemplate] = OrderedDict()
        self._cache_size = cache_size
        self._watchdog = WATCHDOG
        self._lock = threading.Lock()

    def compiled(self, source: str) -> ChatTemplate:
        """The compiled template (thread-safe; a compile never holds the lock)."""
        with self._lock:
            template = self._cache.get(source)
            if template is not None:
                self._cache.move_to_end(source)
                return template
        # Guarded filters are never folded at compile time, but compiling is bounded all the same.
        template = self._guarded(ChatTemplate, source, self._env)
        with self._lock:
            self._cache[source] = template
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return template

    def render(
        self,
        template: ChatTemplate,
        messages,
        tools=None,
        documents=None,
        *,
        add_generation_prompt=True,
        continue_final_message=False,
        variables=None,
    ) -> str:
        return self._guarded(
            template.render,
            messages,
            tools,
            documents,
            add_generation_prompt,
            continue_final_message,
            variables or {},
            self.max_chars,
        )

    def _guarded(self, function, *args):
        """`function(*args)` under the time limit, with whatever it raises turned into a typed error."""
        try:
            return self._watchdog.run(self.timeout_s, function, *args)
        except TemplateTimeout as error:
            raise fail(Reason.TEMPLATE_TIMEOUT, str(error)) from None
        except (TemplateTooLarge, MemoryError) as error:
            raise fail(Reason.TEMPLATE_OUTPUT_TOO_LARGE, str(error) or "the template used too much memory") from None
        except ServiceError:
            raise
        except Exception as error:
            raise fail(Reason.TEMPLATE_ERROR, f"chat template failed: {type(error).__name__}: {error}") from None
