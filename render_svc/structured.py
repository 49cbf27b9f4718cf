"""Structured outputs in render: what a request asks of its output, compiled into the GenerateRequest.

Three sources, at most one per request (CONFLICTING_OPTIONS otherwise, but see the forced tool choice), as vLLM
takes them:
- `response_format`: {"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": ...}} (`strict`
  or not: the schema is always enforced), {"type": "structural_tag", ...}; {"type": "text"} asks nothing;
- vLLM's `structured_outputs`: exactly one of json / regex / choice / grammar / json_object / structural_tag,
  with its whitespace options; SGLang's `regex`, `ebnf` and (completions) `json_schema` fields are its regex,
  grammar and json;
- a forced tool choice (chat): `required` becomes a JSON schema over a non-empty array of
  {"name": <a tool's name>, "parameters": <its parameters>} objects (at most one with parallel_tool_calls
  false), a named function its parameters' schema -- vLLM's forms, which derender parses back into tool calls;
  with parallel calls the message says the output is a list (`items`: end "]", separators ","), so the engine
  opens no call the tokens left cannot hold (engine_svc/structured/items.py). A `response_format` beside it is
  checked, then has nothing to shape: the forced output is calls, no text (OpenAI's reading, and vLLM's;
  instructor's RESPONSES_TOOLS mode always sends both);
- strict tools (`tools[].function.strict: true`) under tool_choice auto: a structural tag in the tool parser's
  format (hermes only: `<tool_call>{"name": ..., "arguments": ...}</tool_call>`), free text until a call opens,
  then one of the tools by name with a strict tool's arguments held to its schema (a non-strict tool's: any JSON
  object). With response_format json_schema / json_object too, the output is that answer or one or more calls.
  With parallel calls the calls are a list with no end of its own (`items`: separators "<", which opens a
  `<tool_call>` among free text, or the "\n" between calls after an answer format), so the engine opens no call
  the tokens left cannot hold there too.
  Another format, or another source of constraint, is refused (the tool's `strict` named).
The result goes into SamplingParams.structured_outputs, checked by the contract's rules
(scaleout_common.structured_output_rules); the engine compiles and enforces it.

Reasoning: when render's reasoning parser (--reasoning-parser; unset: `think` if the tokenizer has <think> and
</think> tokens) applies, the constraint starts after the reasoning: the parser's tags travel as token ids
(ReasoningTokens) with `started` (the prompt opened the block), unless the prompt already closed it
(`reasoning_ended`, e.g. a template that renders an empty block when thinking is off).

`bad_words` become token id sequences as vLLM makes them: each word alone and after a space.
"""

from __future__ import annotations

import json
from typing import Any

from render_svc.client_json import Fields
from render_svc.convert import value_to_py
from scaleout.v1 import common_pb2, derender_pb2
from scaleout_common import structured_output_rules as rules
from scaleout_common.errors import quote
from scaleout_common.reasoning_ids import REASONING_TAGS, ReasoningIds, to_proto, tokenizer_spec
from scaleout_common.reasons import Reason, fail
from scaleout_common.response_templates import NAMES as TEMPLATE_PARSERS
from scaleout_common.response_templates import declared, load_template, reasoning_tags

NONE = "none"
ONE_OF = "json, regex, choice, grammar, json_object, structural_tag"
EMPTY_PARAMETERS = {"type": "object", "properties": {}}
HERMES = "hermes"  # the one tool-call format strict tools under tool_choice auto are enforced in
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
CALLS_SEPARATOR = "\n"  # between calls after an answer format's alternative


def _json_text(value, field: str) -> str:
    """A schema given as an object or as its JSON text, as JSON text."""
    if isinstance(value, str):
        rules.parse_json(value, field, "the schema")
        return value
    if isinstance(value, (dict, bool)):
        return json.dumps(value, ensure_ascii=False)
    raise fail(Reason.INVALID_REQUEST, "a JSON schema is an object (or its JSON text)", field)


def from_structured_outputs(params) -> common_pb2.StructuredOutputs:
    """vLLM's `structured_outputs` request field -> the contract's constraint."""
    out = common_pb2.StructuredOutputs(
        disable_additional_properties=params.disable_additional_properties,
        whitespace_pattern=params.whitespace_pattern,
    )
    given = []
    json_value = value_to_py(params.json) if params.HasField("json") else None
    if json_value is not None:
        given.append("json")
        out.json_schema = _json_text(json_value, "structured_outputs.json")
    if params.regex:
        given.append("regex")
        out.regex = params.regex
    if params.choice:
        given.append("choice")
        out.choice.values.extend(params.choice)
    if params.grammar:
        given.append("grammar")
        out.grammar = params.grammar
    if params.json_object:
        given.append("json_object")
        out.json_object = True
    if params.structural_tag:
        given.append("structural_tag")
        out.structural_tag = params.structural_tag
    if len(given) > 1:
        raise fail(
            Reason.CONFLICTING_OPTIONS,
            f"structured_outputs takes one kind of constraint; got {', '.join(given)}",
            "structured_outputs",
        )
    if not given and not params.HasField("disable_any_whitespace"):
        raise fail(Reason.INVALID_GRAMMAR, f"structured_outputs must set one of {ONE_OF}", "structured_outputs")
    return out  # (no constraint: whitespace options for the request's other constraint)


# The keys each response_format type takes (OpenAI's; `description` guides the model there and constrains
# nothing, `strict: false` asks for less than the schema is held to here). Any other key is refused.
RESPONSE_FORMAT_KEYS = {"text": {"type"}, "json_object": {"type"}, "json_schema": {"type", "json_schema"}}
JSON_SCHEMA_KEYS = {"name", "description", "schema", "strict"}


def _refuse_unknown(given: dict, known: set[str], path: str) -> None:
    fields = Fields(given, path)
    for key in known:
        fields.take(key)
    fields.done()


def from_response_format(value) -> common_pb2.StructuredOutputs | None:
    """OpenAI's (and vLLM's) response_format -> the contract's constraint; None for {"type": "text"}."""
    fmt = value_to_py(value)
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise fail(Reason.INVALID_REQUEST, 'response_format is an object with a "type"', "response_format")
    kind = fmt["type"]
    if kind in RESPONSE_FORMAT_KEYS:
        _refuse_unknown(fmt, RESPONSE_FORMAT_KEYS[kind], "response_format")
    if kind == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        _refuse_unknown(fmt["json_schema"], JSON_SCHEMA_KEYS, "response_format.json_schema")
    if kind == "text":
        return None
    if kind == "json_object":
        return common_pb2.StructuredOutputs(json_object=True)
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or spec.get("schema") is None:
            raise fail(
                Reason.INVALID_REQUEST,
                'response_format json_schema needs {"json_schema": {"name": ..., "schema": {...}}}',
                "response_format.json_schema.schema",
            )
        return common_pb2.StructuredOutputs(
            json_schema=_json_text(spec["schema"], "response_format.json_schema.schema")
        )
    if kind == "structural_tag":
        return common_pb2.StructuredOutputs(structural_tag=json.dumps(fmt, ensure_ascii=False))
    raise fail(
        Reason.INVALID_REQUEST,
        f"response_format type {quote(kind)} is not one of text, json_object, json_schema, structural_tag",
        "response_format.type",
    )


def _hoist_defs(schema: Any, defs: dict) -> Any:
    """A tool's parameters with their `$defs` moved to the root (`#/$defs/...` refers to the root once nested)."""
    if isinstance(schema, dict) and isinstance(schema.get("$defs"), dict):
        for name, definition in schema["$defs"].items():
            if name in defs and defs[name] != definition:
                raise fail(Reason.INVALID_TOOL, f"two tools define $defs/{name} differently; rename one", "tools")
            defs[name] = definition
        schema = {k: v for k, v in schema.items() if k != "$defs"}
    return schema


def tool_call_schema(tools: list[dict], mode: int, function: str, parallel: bool) -> dict | None:
    """The JSON schema a forced tool choice puts on the output (vLLM's), or None for none / auto."""
    if mode == derender_pb2.TOOL_CHOICE_MODE_NAMED:
        tool = next(t for t in tools if t["function"]["name"] == function)
        return tool["function"].get("parameters") or EMPTY_PARAMETERS
    if mode != derender_pb2.TOOL_CHOICE_MODE_REQUIRED:
        return None
    defs: dict = {}
    options = [
        {
            "properties": {
                "name": {"type": "string", "enum": [t["function"]["name"]]},
                "parameters": _hoist_defs(t["function"].get("parameters") or EMPTY_PARAMETERS, defs),
            },
            "required": ["name", "parameters"],
        }
        for t in tools
    ]
    schema: dict = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": options}}
    if not parallel:
        schema["maxItems"] = 1
    if defs:
        schema["$defs"] = defs
    return schema


def _hermes_call_tags(tools: list[dict]) -> list[dict]:
    """One structural-tag `tag` per tool (the call object opening on the same line as `<tool_call>` or the
    next): its name fixed, a strict tool's arguments held to its parameters, another's any JSON object."""
    tags = []
    for tool in tools:
        function = tool["function"]
        strict = function.get("strict") is True
        schema = (function.get("parameters") or EMPTY_PARAMETERS) if strict else {"type": "object"}
        head = '{"name": ' + json.dumps(function["name"], ensure_ascii=False) + ', "arguments": '
        for gap in ("", "\n"):
            tags.append(
                {
                    "type": "tag",
                    "begin": CALL_OPEN + gap + head,
                    "content": {"type": "json_schema", "json_schema": schema},
                    "end": ["}" + CALL_CLOSE, "}\n" + CALL_CLOSE],
                }
            )
    return tags


def first_strict(tools: list[dict]) -> int | None:
    return next((i for i, tool in enumerate(tools) if tool["function"].get("strict") is True), None)


def strict_auto_tag(tools: list[dict], tool_format: str, parallel: bool, answer: dict | None) -> dict | None:
    """The structural tag that enforces strict tools under tool_choice auto (None: no tool is strict). `answer`:
    the response_format's content as a structural-tag format (the output is then it or calls, no free text)."""
    first = first_strict(tools)
    if first is None:
        return None
    if tool_format != HERMES:
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            f"strict tools under tool_choice auto are enforced in the hermes tool-call format only; this model's "
            f"is {quote(tool_format)}: set tool_choice to required or to the tool, or strict to false",
            f"tools[{first}].function.strict",
        )
    tags = _hermes_call_tags(tools)
    if answer is None:
        form = {"type": "triggered_tags", "triggers": [CALL_OPEN], "tags": tags, "stop_after_first": not parallel}
    else:
        calls = {"type": "tags_with_separator", "tags": tags, "separator": CALLS_SEPARATOR, "at_least_one": True}
        form = {"type": "or", "elements": [answer, {**calls, "stop_after_first": not parallel}]}
    return {"type": "structural_tag", "format": form}


def _answer_format(message: common_pb2.StructuredOutputs) -> dict | None:
    """A response_format constraint as a structural-tag format, None where it has no such form."""
    if message.WhichOneof("constraint") == "json_schema":
        return {"type": "json_schema", "json_schema": json.loads(message.json_schema)}
    if message.WhichOneof("constraint") == "json_object":
        return {"type": "json_schema", "json_schema": {"type": "object"}}
    return None


# SGLang's constraint fields of a chat or completion request -> the contract's kind of constraint.
SGLANG_FIELDS = {"regex": "regex", "ebnf": "grammar", "json_schema": "json_schema"}


def constraint(
    request,
    tools: list[dict] | None = None,
    tool_mode: int = 0,
    tool_function: str = "",
    tool_format: str = HERMES,
):
    """The request's constraint (None: unconstrained), from whichever source it came, checked. `tool_format`:
    the tool parser that reads the output's calls (strict tools under auto are enforced in it)."""
    found: list[tuple[str, common_pb2.StructuredOutputs]] = []
    options_only = False
    parallel = not tools or not request.HasField("parallel_tool_calls") or request.parallel_tool_calls
    if request.HasField("structured_outputs"):
        given = from_structured_outputs(request.structured_outputs)
        options_only = rules.kind(given) is None
        if not options_only:
            found.append(("structured_outputs", given))
    for name, kind in SGLANG_FIELDS.items():
        if getattr(request, name, ""):
            found.append((name, common_pb2.StructuredOutputs(**{kind: getattr(request, name)})))
    forced = (  # the tools when tool_choice forces a call
        tools if tool_mode in (derender_pb2.TOOL_CHOICE_MODE_REQUIRED, derender_pb2.TOOL_CHOICE_MODE_NAMED) else None
    )
    if request.HasField("response_format"):
        fmt = from_response_format(request.response_format)
        if fmt is not None and forced:
            rules.check(fmt, prefix="response_format")  # refused if bad, else moot: the output is calls only
        elif fmt is not None:
            found.append(("response_format", fmt))
    if forced:
        schema = tool_call_schema(forced, tool_mode, tool_function, parallel)
        found.append(("tool_choice", common_pb2.StructuredOutputs(json_schema=json.dumps(schema, ensure_ascii=False))))
    if tools and tool_mode == derender_pb2.TOOL_CHOICE_MODE_AUTO:
        answer = None
        if len(found) == 1 and found[0][0] == "response_format":
            answer = _answer_format(found[0][1])
        tag = strict_auto_tag(tools, tool_format, parallel, answer)
        if tag is not None:
            if answer is not None:
                rules.check(found.pop()[1], prefix="response_format")
            field = f"tools[{first_strict(tools)}].function.strict"
            tagged = common_pb2.StructuredOutputs(structural_tag=json.dumps(tag, ensure_ascii=False))
            if parallel:  # a call may follow a call: it opens with a separator, the output's stop ends the list
                separators = CALL_OPEN[0] if answer is None else CALLS_SEPARATOR
                tagged.items.CopyFrom(common_pb2.StructuredOutputs.ItemList(separators=separators))
            found.append((field, tagged))
    if not found:
        if options_only:
            raise fail(
                Reason.INVALID_GRAMMAR,
                f"structured_outputs must set one of {ONE_OF}, or come with response_format or a forced or strict tool",
                "structured_outputs",
            )
        return None
    if len(found) > 1:
        raise fail(
            Reason.CONFLICTING_OPTIONS,
            f"{' and '.join(name for name, _ in found)} each constrain the output; give one",
            found[1][0],
        )
    source, message = found[0]
    message.disable_any_whitespace = compact(request)
    if source == "tool_choice" and tool_mode == derender_pb2.TOOL_CHOICE_MODE_REQUIRED and parallel:
        # the JSON array of calls may end after any whole call
        separators = "," if message.disable_any_whitespace else ", \t\n\r"
        message.items.CopyFrom(common_pb2.StructuredOutputs.ItemList(end="]", separators=separators))
    rules.check(message, prefix=source)
    return message


def compact(request) -> bool:
    """JSON without free whitespace unless `structured_outputs.disable_any_whitespace` is false: a weak model
    given any whitespace pretty-prints, or runs into max_tokens on it."""
    params = request.structured_outputs
    return (
        not request.HasField("structured_outputs")
        or not params.HasField("disable_any_whitespace")
        or (params.disable_any_whitespace)
    )


class Reasoning:
    """The reasoning parser's tags as this tokenizer's ids, made once per parser name."""

    def __init__(self, tokenizer, parser: str):
        self.tokenizer = tokenizer
        vocab = tokenizer.get_vocab()
        self.name = parser or ("think" if "<think>" in vocab and "</think>" in vocab else NONE)
        self.tags = REASONING_TAGS.get(self.name)
        if self.name in TEMPLATE_PARSERS:  # `hf` / `beam`: the model's response_template declares the tags
            template, _ = load_template(declared(tokenizer))
            self.tags = None if template is None else reasoning_tags(template)
        if self.tags is None:
            self.name = NONE  # a parser this table does not know gates nothing (derender still parses it)
        self._spec: ReasoningIds | None = None

    def spec(self) -> ReasoningIds:
        """The tags' ids: each tag as the tokenizer encodes it alone, and (plain-text tags of a byte-level
        vocabulary) after a space, where the space merges into the tag's first token (`Ġ</` `think` `>`)."""
        if self._spec is None:
            self._spec = tokenizer_spec(self.tags, self._encode)
        return self._spec

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def started(self, prompt_text: str) -> bool | None:
        """Whether the prompt opened the block; None when the output cannot reason (no reasoning format, or
        the template closed the block: thinking turned off)."""
        tags = self.tags
        if self.name == NONE or tags is None:
            return None
        tail = prompt_text.rstrip()
        if any(tail.endswith(end.rstrip()) for end in tags.END if end.strip()):
            return None
        last_start = max((prompt_text.rfind(tag) for tag in tags.START), default=-1)
        last_end = max((prompt_text.rfind(tag) for tag in tags.END), default=-1)
        return last_start > last_end

    def gate(self, message: common_pb2.StructuredOutputs, prompt_text: str) -> None:
        """Where in the output the constraint starts: after the reasoning, unless the prompt closed it."""
        started = self.started(prompt_text)
        if started is None:
            message.reasoning_ended = True
        else:
            to_proto(self.spec(), started, message.reasoning)

    def cap(self, params: common_pb2.SamplingParams, budget: int, prompt_text: str) -> None:
        """The thinking budget, where the output can reason (elsewhere nothing is reasoned: nothing to cap)."""
        if budget < 0:
            raise fail(Reason.INVALID_SAMPLING_PARAM, "thinking_token_budget must be >= 0", "thinking_token_budget")
        started = self.started(prompt_text)
        if started is not None and self.spec().end:
            params.thinking_budget.max_tokens = budget
            to_proto(self.spec(), started, params.thinking_budget.reasoning)


def bad_words(tokenizer, words) -> list[list[int]]:
    """Token id sequences of `bad_words`, as vLLM makes them: each word alone, and after a space when that makes
    a different first token of the same length."""
    out: list[list[int]] = []
    for i, word in enumerate(words):
        if not word:  # vLLM's SamplingParams refuses it too: it would ban nothing, or everything
            raise fail(Reason.INVALID_SAMPLING_PARAM, "bad_words must not contain an empty string", f"bad_words[{i}]")
        alone = tokenizer.encode(word.lstrip(), add_special_tokens=False)
        if alone:
            out.append(alone)
        spaced = tokenizer.encode(" " + word.lstrip(), add_special_tokens=False)
        if spaced and alone and spaced[0] != alone[0] and len(spaced) == len(alone):
            out.append(spaced)
    return out


def apply(
    params: common_pb2.SamplingParams, message, request, tokenizer, reasoning: Reasoning | None, prompt_text: str
):
    """Write the constraint (already checked), the thinking budget and the bad words into resolved
    SamplingParams."""
    if reasoning is not None and request.HasField("thinking_token_budget"):
        reasoning.cap(params, request.thinking_token_budget, prompt_text)
    if message is not None:
        if reasoning is not None:
            reasoning.gate(message, prompt_text)
        else:
            message.reasoning_ended = True
        params.structured_outputs.CopyFrom(message)
    for ids in bad_words(tokenizer, request.bad_words):
        params.bad_words.add(token_ids=ids)
