"""SGLang's `/v1/decisions` body (its DecisionRequest, prompt format version 1), on the path OpenAI's Decisions API
shares (pipeline_svc/decisions.py): questions with an `id` and a `question` are SGLang's. Each is one label read
(pipeline_svc/label_reads.py) of SGLang's wording: the input, a blank line, then

- `choice`: `Question: <question>`, `A: <name> - <description>` per option (2 to 26, distinct names),
  `Answer with the letter of one option only.`;
- `score`: `Question: <question>`, `0: <level>` per level (2 to 10), `Answer with the number of one level only.`;
- `yes_no`: `Is the following true? <question>`, `yes: <what yes means>` / `no: ...` where described,
  `Answer with yes or no only.`;

as one user turn, thinking off. A text field may be JSON (its compact text). The answer is SGLang's: per question
id the labels' `probabilities` (softmax over the labels, sharpened by `temperature`), `label_mass`, the `choice` or
the expected `score`; with `return_prompt_token_ids` each read's prompt and label ids. `prompt_format_version` other
than 1 and `images` (the model takes text) are refused with SGLang's words, as is any other field.
"""

from __future__ import annotations

import json
import math
import uuid

from pipeline_svc.label_reads import (
    ANSWER_LETTER,
    ANSWER_NUMBER,
    ANSWER_YES_NO,
    LETTERS,
    YES_NO,
    Ask,
    LabelTokens,
    Read,
    read_all,
)
from scaleout_common.errors import QUOTE_CHARS, clip
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

PROMPT_FORMAT_VERSION = 1
FIELDS = {"input", "images", "questions", "temperature", "chat_template_kwargs", "prompt_format_version"}
FIELDS |= {"return_prompt_token_ids", "model"}
QUESTION_FIELDS = {"choice": {"options"}, "score": {"levels"}, "yes_no": {"yes", "no"}}
REPLY = {"choice": ANSWER_LETTER, "score": ANSWER_NUMBER, "yes_no": ANSWER_YES_NO}


def is_sglang_body(body: dict) -> bool:
    questions = body.get("questions")
    return isinstance(questions, list) and any(isinstance(q, dict) and "question" in q for q in questions)


def text_of(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _text(value, where: str, required: bool = True) -> str:
    if not isinstance(value, (str, dict, list)) and not (value is None and not required):
        raise fail(Reason.INVALID_REQUEST, f"`{where}` must be text or JSON", where)
    if required and not (value.strip() if isinstance(value, str) else value):
        raise fail(Reason.INVALID_REQUEST, f"`{where}` must not be blank", where)
    return text_of(value)


def _question(question, where: str) -> tuple[str, str, list[str], list[str], str]:
    """(id, type, option names, labels, the question's prompt lines)."""
    kind = question.get("type") if isinstance(question, dict) else None
    if kind not in QUESTION_FIELDS:
        raise fail(Reason.INVALID_REQUEST, f"`{where}.type` must be choice, score or yes_no", f"{where}.type")
    extra = set(question) - {"id", "type", "question"} - QUESTION_FIELDS[kind]
    if extra:
        raise fail(Reason.UNSUPPORTED_FIELD, f"`{where}.{clip(sorted(extra)[0], QUOTE_CHARS)}` is not a field", where)
    qid = question.get("id")
    if not isinstance(qid, str) or not qid.strip():
        raise fail(Reason.INVALID_REQUEST, f"`{where}.id` must be a non-blank string", f"{where}.id")
    text = _text(question.get("question"), f"{where}.question")
    if kind == "choice":
        options = question.get("options")
        if not isinstance(options, list) or not 2 <= len(options) <= 26:
            raise fail(Reason.INVALID_REQUEST, f"question {qid!r}: 2 to 26 options", f"{where}.options")
        if not all(isinstance(o, dict) and isinstance(o.get("name"), str) and set(o) <= {"name", "description"}
                   for o in options):  # fmt: skip
            raise fail(Reason.INVALID_REQUEST, f"question {qid!r}: each option is a name and a description", where)
        names = [o["name"] for o in options]
        if len(set(names)) != len(names):
            raise fail(Reason.INVALID_REQUEST, f"question {qid!r}: option names must be distinct", f"{where}.options")
        labels = list(LETTERS[: len(names)])
        details = [_text(o.get("description"), f"{where}.options", required=False) for o in options]
        lines = [f"Question: {text}"] + [
            f"{la}: {n} - {d}" if d else f"{la}: {n}" for la, n, d in zip(labels, names, details)
        ]
    elif kind == "score":
        levels = question.get("levels")
        if not isinstance(levels, list) or not 2 <= len(levels) <= 10:
            raise fail(Reason.INVALID_REQUEST, f"question {qid!r}: 2 to 10 levels", f"{where}.levels")
        names = labels = [str(i) for i in range(len(levels))]
        lines = [f"Question: {text}"] + [
            f"{i}: {_text(level, f'{where}.levels[{i}]')}" for i, level in enumerate(levels)
        ]
    else:
        names = labels = [*YES_NO]
        details = [_text(question.get(side), f"{where}.{side}", required=False) for side in names]
        lines = [f"Is the following true? {text}"] + [f"{la}: {d}" for la, d in zip(labels, details) if d]
    return qid, kind, names, labels, "\n".join([*lines, REPLY[kind]])


def parse(body: bytes) -> tuple[dict, list[tuple[str, str, list[str], list[str], str]]]:
    data = {k: v for k, v in load_object(body).items() if v is not None}
    for name in data:
        if name not in FIELDS:
            raise fail(Reason.UNSUPPORTED_FIELD, f"`{clip(name, QUOTE_CHARS)}` is not a field this API takes", name)
    version = data.get("prompt_format_version", PROMPT_FORMAT_VERSION)
    if version != PROMPT_FORMAT_VERSION:
        message = f"prompt_format_version {clip(str(version), QUOTE_CHARS)} is not served, this server uses version 1"
        raise fail(Reason.UNSUPPORTED_FIELD, message, "prompt_format_version")
    if data.get("images"):
        raise fail(
            Reason.UNSUPPORTED_FIELD, "/v1/decisions images require a model served with multimodal inputs", "images"
        )
    temperature = data.setdefault("temperature", 1.0)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 < temperature < math.inf:
        raise fail(Reason.INVALID_REQUEST, "`temperature` must be finite and greater than zero", "temperature")
    kwargs = data.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise fail(Reason.INVALID_REQUEST, "`chat_template_kwargs` must be an object", "chat_template_kwargs")
    if kwargs.get("enable_thinking") or kwargs.get("thinking"):
        message = "chat_template_kwargs turns thinking on, but decisions need it false or unset"
        raise fail(Reason.INVALID_REQUEST, message, "chat_template_kwargs")
    if not isinstance(data.get("return_prompt_token_ids", False), bool):
        raise fail(Reason.INVALID_REQUEST, "`return_prompt_token_ids` must be a boolean", "return_prompt_token_ids")
    data["input"] = _text(data.get("input"), "input")
    questions = data.get("questions")
    if not isinstance(questions, list) or not questions:
        raise fail(Reason.INVALID_REQUEST, "`questions` must be a non-empty list", "questions")
    parsed = [_question(q, f"questions[{i}]") for i, q in enumerate(questions)]
    ids = [qid for qid, *_ in parsed]
    repeated = next((qid for i, qid in enumerate(ids) if qid in ids[:i]), None)
    if repeated is not None:
        raise fail(Reason.INVALID_REQUEST, f"question id {repeated!r} repeats another question", "questions")
    return data, parsed


def _answer(kind: str, names: list[str], read: Read, temperature: float, ids: bool) -> dict:
    probs = read.probs(temperature)
    answer: dict = {"type": kind, "probabilities": dict(zip(names, probs)), "label_mass": read.label_mass()}
    if kind == "choice":
        answer["choice"] = names[probs.index(max(probs))]
    elif kind == "score":
        answer["score"] = math.fsum(i * p for i, p in enumerate(probs))
    if ids:
        answer |= {"prompt_token_ids": list(read.prompt), "label_token_ids": list(read.label_ids)}
    return answer


async def decide(hops, tokens: LabelTokens, body: bytes, context) -> dict:
    data, questions = parse(body)
    asks = [Ask(f"{data['input']}\n\n{prompt}", tuple(labels)) for _, _, _, labels, prompt in questions]
    shared = {"model": data.get("model", ""), "request_id": f"decision-{uuid.uuid4().hex}"}
    if data.get("chat_template_kwargs"):
        shared["chat_template_kwargs"] = data["chat_template_kwargs"]
    reads = await read_all(hops, tokens, asks, shared, context)
    ids = data.get("return_prompt_token_ids", False)
    prompt_tokens, completion_tokens = sum(r.input_tokens for r in reads), sum(r.output_tokens for r in reads)
    return {
        "object": "decisions",
        "model": data.get("model") or reads[0].model,
        "prompt_format_version": PROMPT_FORMAT_VERSION,
        "answers": {
            qid: _answer(kind, names, read, data["temperature"], ids)
            for (qid, kind, names, _, _), read in zip(questions, reads)
        },
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
        },
    }
