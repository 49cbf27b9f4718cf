"""Conversation fixtures for render parity: each case is a RenderChatRequest (wire form) plus the exact
arguments apply_chat_template gets for it (reference form)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import json_format

from scaleout.v1 import render_pb2

TEMPLATES = Path(__file__).parent / "templates"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city"],
        },
    },
}
CALC = {
    "type": "function",
    "function": {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}


def call(name: str, arguments: dict, call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@dataclass
class Case:
    name: str
    messages: list[dict]  # reference form: string content, tool-call arguments as dicts
    tools: list[dict] | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    kwargs: dict = field(default_factory=dict)
    parts: bool = False  # send each message's content as text parts (split on "\n")

    def request(self, **extra) -> render_pb2.RenderChatRequest:
        wire = []
        for message in self.messages:
            item = dict(message)
            if self.parts and isinstance(item.get("content"), str):
                item["content"] = [{"type": "text", "text": t} for t in item["content"].split("\n")]
            if "tool_calls" in item:
                item["tool_calls"] = [
                    {**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])}}
                    for c in item["tool_calls"]
                ]
            wire.append(item)
        body = {
            "messages": wire,
            "add_generation_prompt": self.add_generation_prompt,
            "continue_final_message": self.continue_final_message,
            **({"tools": self.tools} if self.tools else {}),
            **({"chat_template_kwargs": self.kwargs} if self.kwargs else {}),
            **extra,
        }
        return json_format.ParseDict(body, render_pb2.RenderChatRequest())

    def reference_tools(self) -> list[dict] | None:
        """The tools as the server sees them: a Struct keeps no key order, so the server sorts parameters' keys."""
        if not self.tools:
            return None
        return [
            {**t, "function": {**t["function"], "parameters": _sorted(t["function"]["parameters"])}} for t in self.tools
        ]

    def reference(self, tokenizer, template: str, tokenize: bool = True):
        messages = self.messages
        if "developer" not in template:  # vLLM renders a developer turn as the system turn then (a leading one here)
            messages = [{**m, "role": "system"} if m["role"] == "developer" else m for m in messages]
        return tokenizer.apply_chat_template(
            messages,
            tools=self.reference_tools(),
            chat_template=template,
            add_generation_prompt=self.add_generation_prompt,
            continue_final_message=self.continue_final_message,
            tokenize=tokenize,
            return_dict=False,
            **self.kwargs,
        )


def _sorted(value):
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _u(text):
    return {"role": "user", "content": text}


def _a(text, **more):
    return {"role": "assistant", "content": text, **more}


def _s(text):
    return {"role": "system", "content": text}


def _t(text, call_id):
    return {"role": "tool", "content": text, "tool_call_id": call_id}


LONG = " ".join(f"Sentence {i} talks about tokenizers, templates and the weather in Paris." for i in range(60))

CONVERSATIONS = {
    "single": [_u("What is the capital of France?")],
    "system": [_s("You are terse."), _u("Name three colors.")],
    "multi_turn": [_u("Hi!"), _a("Hello! How can I help?"), _u("Tell me a joke.")],
    "five_turns": [_s("Be kind."), _u("1"), _a("one"), _u("2"), _a("two"), _u("3"), _a("three"), _u("4")],
    "unicode": [_u("Ça va? 你好 🌍 — naïve café ½"), _a("Très bien 👍"), _u("日本語で答えて")],
    "whitespace": [_u("  leading and trailing  \n\n"), _a("\nok\n"), _u("\tindented\n  lines  ")],
    "special_text": [_u("What does <|im_end|> mean? And <think>?")],
    "developer": [{"role": "developer", "content": "Answer in French."}, _u("Hello")],
    "empty_system": [_s(""), _u("Anything?")],
    "long": [_s("Summarize."), _u(LONG)],
    "tool_call": [
        _u("Weather in Paris?"),
        _a("", tool_calls=[call("get_weather", {"city": "Paris"}, "call_1")]),
        _t('{"temp_c": 21, "sky": "clear"}', "call_1"),
    ],
    "parallel_tools": [
        _s("Use tools."),
        _u("Weather in Paris and 2+2?"),
        _a(
            "Checking both.",
            tool_calls=[
                call("get_weather", {"city": "Paris", "days": 2}, "c1"),
                call("calculate", {"expression": "2+2"}, "c2"),
            ],
        ),
        _t("sunny", "c1"),
        _t("4", "c2"),
        _a("Sunny, and 4."),
        _u("Thanks!"),
    ],
    "reasoning_history": [
        _u("What is 2+2?"),
        _a("4", reasoning_content="Two plus two is four."),
        _u("And 3+3?"),
    ],
    "think_in_content": [_u("Pick a number."), _a("<think>\nrandom pick\n</think>\n\n7"), _u("Another?")],
    "tool_then_answer": [
        _u("Compute 6*7"),
        _a("", tool_calls=[call("calculate", {"expression": "6*7"}, "x")]),
        _t("42", "x"),
        _a("It is 42."),
        _u("Double it."),
    ],
}

CONTINUATIONS = {
    "continue_plain": [_u("Finish the sentence."), _a("The capital of France is")],
    "continue_space": [_u("Count."), _a("One, two, ")],
    "continue_think": [_u("Solve 12*12."), _a("<think>\nLet me multiply")],
}

PARTS = ("single", "multi_turn", "whitespace", "unicode")


def cases() -> list[Case]:
    out = []
    for name, messages in CONVERSATIONS.items():
        tools = [WEATHER, CALC] if "tool" in name else None
        out.append(Case(name, messages, tools))
        out.append(Case(f"{name}-no_gen_prompt", messages, tools, add_generation_prompt=False))
        out.append(Case(f"{name}-think_off", messages, tools, kwargs={"enable_thinking": False}))
        if name in ("single", "multi_turn", "reasoning_history"):
            out.append(Case(f"{name}-think_on", messages, tools, kwargs={"enable_thinking": True}))
            out.append(Case(f"{name}-tools", messages, [WEATHER]))
    for name, messages in CONTINUATIONS.items():
        out.append(Case(name, messages, add_generation_prompt=False, continue_final_message=True))
        out.append(Case(f"{name}-tools", messages, [CALC], add_generation_prompt=False, continue_final_message=True))
    for name in PARTS:
        out.append(Case(f"{name}-parts", CONVERSATIONS[name], parts=True))
    return out


FAMILIES = {
    "default": None,  # the model's own ChatML template
    "llama3": TEMPLATES / "llama3.jinja",
    "qwen3": TEMPLATES / "qwen3.jinja",
}
