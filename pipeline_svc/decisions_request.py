"""OpenAI's `/v1/decisions` JSON (`client.decisions.create`; vLLM 0.33's route of that name) -> the questions to read,
every field honoured or refused.

The policy, field by field (OpenAI's request shape; vLLM's bounds and words where it has them):
- `input`: a string, or messages: `user` messages (content a string or `input_text` / `input_json` parts) are the
  input, joined as vLLM joins them (messages by a blank line, parts by a newline; JSON as its text);
  `system` / `developer` messages (text) are the reads' system message. Images are refused with vLLM's words
  (the model takes text), as are assistant messages and tool calls and their outputs (UNSUPPORTED_FIELD naming
  the item): a read asks about an input, not a conversation to continue;
- `questions`: 1 to 64 (vLLM's bound for a model read one question at a time), each `predicate`, `choice` (2 to
  26 distinct typed values: a letter labels each) or `score` (2 to 10 levels), with `instructions` (a string or
  text / JSON parts) and an optional `name`, echoed on its answer;
- `model`, `safety_identifier` (up to 128 characters: the caller's identity on the trace), `prompt_cache_key`
  (the reads' routing key, as chat's), vLLM's `cache_salt` and `joint` (false: one read per question; true is a
  diffusion model's, refused with vLLM's words) are honoured;
- `prompt_cache_options`: `mode` "implicit" is what the engine's prefix cache does; "explicit" breakpoints, a
  `prompt_cache_breakpoint` on a part, and a `ttl` (a minimum lifetime the cache does not promise) are refused;
- any other field is refused (UNSUPPORTED_FIELD naming it); `null` means "not given".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pipeline_svc.label_reads import LETTERS
from scaleout_common.errors import QUOTE_CHARS, clip
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

MAX_QUESTIONS = 64
MAX_LEVELS = 10
MAX_CHOICES = 255  # OpenAI's bound; a model read by labels takes at most len(LETTERS)
MAX_SAFETY_IDENTIFIER = 128
TEXT_ONLY = "Decisions supports text input only; images are not supported"
FIELDS = {"model", "input", "questions", "safety_identifier", "prompt_cache_key", "prompt_cache_options"}
FIELDS |= {"cache_salt", "joint"}  # vLLM's


@dataclass(frozen=True)
class Question:
    kind: str  # predicate, choice or score
    name: str | None
    instructions: str
    options: tuple[tuple[str, str], ...]  # (what the model reads, its description) per label
    values: tuple = ()  # a choice's typed values, a score's level labels


@dataclass
class DecisionRequest:
    model: str
    input: str
    system: str  # the system and developer messages' text ("" if none)
    questions: list[Question]
    routing: dict[str, str] = field(default_factory=dict)  # cache_salt, prompt_cache_key
    identity: dict[str, str] = field(default_factory=dict)


def _string(value, where: str, limit: int | None = None) -> str:
    if not isinstance(value, str):
        raise fail(Reason.INVALID_REQUEST, f"`{where}` must be a string", where)
    if limit is not None and len(value) > limit:
        raise fail(Reason.INVALID_REQUEST, f"`{where}` is longer than {limit} characters", where)
    return value


def _unsupported(where: str, why: str):
    where = clip(where, QUOTE_CHARS)
    return fail(Reason.UNSUPPORTED_FIELD, f"`{where}` {why}", where)


def _parts_text(value, where: str, joiner: str = "\n") -> str:
    """A string, or text and JSON parts joined (images refused, prompt cache breakpoints refused)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        raise fail(Reason.INVALID_CONTENT, f"`{where}` must be a string or a non-empty list of parts", where)
    texts = []
    for i, part in enumerate(value):
        here = f"{where}[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_image":
            raise fail(Reason.UNSUPPORTED_FIELD, TEXT_ONLY, here)
        if kind not in ("input_text", "input_json"):
            raise fail(Reason.INVALID_CONTENT, f"`{here}` must be an input_text or input_json part", here)
        if part.get("prompt_cache_breakpoint") is not None:
            raise _unsupported(f"{here}.prompt_cache_breakpoint", "is not supported: the prefix cache is implicit")
        extra = set(part) - {"type", "text", "data", "prompt_cache_breakpoint"}
        if extra:
            raise _unsupported(f"{here}.{sorted(extra)[0]}", "is not a field of a part")
        if kind == "input_text":
            texts.append(_string(part.get("text"), f"{here}.text"))
        elif isinstance(part.get("data"), (dict, list)):
            texts.append(json.dumps(part["data"], ensure_ascii=False))
        else:
            raise fail(Reason.INVALID_CONTENT, f"`{here}.data` must be a JSON object or array", f"{here}.data")
    return joiner.join(texts)


def _input(value) -> tuple[str, str]:
    """The input's text and its system text."""
    if isinstance(value, str):
        return value, ""
    if not isinstance(value, list) or not value:
        raise fail(Reason.INVALID_REQUEST, "`input` must be a string or a non-empty list of messages", "input")
    user, system = [], []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise fail(Reason.INVALID_REQUEST, f"`{where}` must be a message object", where)
        kind, role = item.get("type", "message"), item.get("role")
        if kind != "message":
            raise _unsupported(f"{where}.type", "is not supported: a decision reads text messages")
        if role == "assistant":
            raise _unsupported(f"{where}.role", "is not supported: a decision reads the input, not a reply")
        if role not in ("user", "system", "developer"):
            raise fail(Reason.INVALID_ROLE, f"`{where}.role` must be user, system or developer", f"{where}.role")
        extra = set(item) - {"type", "role", "content"}
        if extra:
            raise _unsupported(f"{where}.{sorted(extra)[0]}", "is not a field of a message")
        (user if role == "user" else system).append(_parts_text(item.get("content"), f"{where}.content"))
    if not user:
        raise fail(Reason.MISSING_PROMPT, "`input` needs a user message", "input")
    return "\n\n".join(user), "\n\n".join(system)


def _options(question: dict, where: str) -> tuple[tuple[tuple[str, str], ...], tuple]:
    kind = question["type"]
    if kind == "predicate":
        return (("false", ""), ("true", "")), ()
    key, low, high = ("choices", 2, MAX_CHOICES) if kind == "choice" else ("levels", 2, MAX_LEVELS)
    items = question.get(key)
    if not isinstance(items, list) or not low <= len(items) <= high:
        raise fail(Reason.INVALID_REQUEST, f"`{where}.{key}` must hold {low} to {high} items", f"{where}.{key}")
    if len(items) > len(LETTERS):
        raise fail(
            Reason.INVALID_REQUEST,
            f"This model supports at most {len(LETTERS)} choices per question",
            f"{where}.{key}",
        )
    options, values = [], []
    for i, item in enumerate(items):
        here = f"{where}.{key}[{i}]"
        name = "value" if kind == "choice" else "label"
        if not isinstance(item, dict) or set(item) - {name, "description"}:
            raise fail(Reason.INVALID_REQUEST, f"`{here}` must be an object of `{name}` and `description`", here)
        value = item.get(name)
        if kind == "choice" and not isinstance(value, (str, bool)):
            raise fail(Reason.INVALID_REQUEST, f"`{here}.value` must be a string or a boolean", f"{here}.value")
        if kind == "score":
            _string(value, f"{here}.label")
        description = _string(item.get("description", ""), f"{here}.description")
        options.append((json.dumps(value, ensure_ascii=False) if kind == "choice" else value, description))
        values.append(value)
    if kind == "choice" and len({(type(v), v) for v in values}) != len(values):
        raise fail(Reason.INVALID_REQUEST, "choice values must be distinct", f"{where}.choices")
    return tuple(options), tuple(values)


def _question(question, where: str) -> Question:
    if not isinstance(question, dict) or question.get("type") not in ("predicate", "choice", "score"):
        raise fail(Reason.INVALID_REQUEST, f"`{where}.type` must be predicate, choice or score", f"{where}.type")
    known = {"type", "instructions", "name", {"choice": "choices", "score": "levels"}.get(question["type"], "type")}
    extra = set(question) - known
    if extra:
        raise _unsupported(f"{where}.{sorted(extra)[0]}", f"is not a field of a {question['type']} question")
    if "instructions" not in question:
        raise fail(Reason.INVALID_REQUEST, f"`{where}.instructions` is required", f"{where}.instructions")
    instructions = _parts_text(question["instructions"], f"{where}.instructions")
    name = _string(question["name"], f"{where}.name") if "name" in question else None
    options, values = _options(question, where)
    return Question(question["type"], name, instructions, options, values)


def _cache_options(value) -> None:
    if not isinstance(value, dict):
        raise fail(Reason.INVALID_REQUEST, "`prompt_cache_options` must be an object", "prompt_cache_options")
    for name, setting in value.items():
        if name == "mode" and setting in ("implicit", None):
            continue
        why = "the prefix cache is implicit" if name == "mode" else "the prefix cache promises no lifetime"
        raise _unsupported(f"prompt_cache_options.{name}", f"is not supported: {why}")


def decision_request(body: bytes) -> DecisionRequest:
    data = {k: v for k, v in load_object(body).items() if v is not None}
    for name in data:
        if name not in FIELDS:
            raise _unsupported(name, "is not a field this API takes")
    if data.get("joint", False) is not False:
        if data["joint"] is True:
            raise _unsupported("joint", "is a diffusion model's: this model reads each question on its own")
        raise fail(Reason.INVALID_REQUEST, "`joint` must be a boolean", "joint")
    if "prompt_cache_options" in data:
        _cache_options(data["prompt_cache_options"])
    questions = data.get("questions")
    if not isinstance(questions, list) or not questions:
        raise fail(Reason.INVALID_REQUEST, "`questions` must be a non-empty list", "questions")
    if len(questions) > MAX_QUESTIONS:
        raise fail(Reason.INVALID_REQUEST, f"questions: at most {MAX_QUESTIONS} for this model", "questions")
    if "input" not in data:
        raise fail(Reason.MISSING_PROMPT, "`input` is required", "input")
    text, system = _input(data["input"])
    request = DecisionRequest(
        model=_string(data.get("model", ""), "model"),
        input=text,
        system=system,
        questions=[_question(q, f"questions[{i}]") for i, q in enumerate(questions)],
    )
    for name in ("cache_salt", "prompt_cache_key"):
        if name in data:
            request.routing[name] = _string(data[name], name)
    if "safety_identifier" in data:
        request.identity["safety_identifier"] = _string(
            data["safety_identifier"], "safety_identifier", MAX_SAFETY_IDENTIFIER
        )
    return request
