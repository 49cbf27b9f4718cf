"""vLLM 0.33's structured decisions API, `POST /v1/systemone` (VllmServerService.StructuredDecisions): questions
about a state, each answered from one label read (pipeline_svc/label_reads.py), with vLLM's prompts, answers,
bounds and words (its entrypoints/generate/structured_decisions and openai/decisions/question_types.py).

The request, field by field:
- `state` (text, or any JSON: its text) is what the questions are about; `instructions` the reads' system message;
- `questions` maps an id to `{type, instructions, criteria}`, 1 to 64 of them, read in order:
  `choice` (criteria: option name -> description or null; 1 to 26, lettered A to Z), `noul` (yes or no; criteria
  may describe `true` and `false`), `score` (criteria: the ordered level names, 2 to 10, numbered 0 to 9);
  a question's other keys are refused with vLLM's words;
- `chat_template_kwargs` go to the template over `enable_thinking: false` (true is refused: a read is the reply's
  first token); `cache_salt`, `priority`, `request_id` (the answer's id is `decision-<it>`) as on chat;
- `images`, `audio`, `videos` (the model takes text) and `joint: true` (a diffusion model's) are refused, as vLLM
  refuses them for such a model; any other field is refused (UNSUPPORTED_FIELD naming it).

The answer is vLLM's: `answers` and `diagnostics` (`label_mass`, `argmax_is_label`) per question id, `usage`
(`input_tokens`, `output_tokens`), `object: "structured_decision"`, `joint: null`.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from pipeline_svc.label_reads import (
    ANSWER_LETTER,
    ANSWER_NUMBER,
    ANSWER_YES_NO,
    DIGITS,
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

MAX_QUESTIONS = 64
FIELDS = {"model", "state", "questions", "instructions", "images", "audio", "videos", "chat_template_kwargs"}
FIELDS |= {"joint", "cache_salt", "priority", "request_id"}
MEDIA = {"images": "image", "audio": "audio", "videos": "video"}
# Per type: its labels, the reply's instruction.
TYPES = {
    "choice": (LETTERS, ANSWER_LETTER),
    "noul": (YES_NO, ANSWER_YES_NO),
    "score": (DIGITS, ANSWER_NUMBER),
}


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    instructions: str
    options: tuple[tuple[str, str | None], ...]  # (name, description)

    @property
    def labels(self) -> tuple[str, ...]:
        return TYPES[self.kind][0][: len(self.options)]

    def prompt(self) -> str:
        lines = []
        for label, (name, about) in zip(self.labels, self.options):
            if self.kind == "noul":  # a side without a description still shows its label
                lines.append(f"{label}: {about}" if about else label)
            else:
                lines.append(f"{label}: {name} - {about}" if about else f"{label}: {name}")
        body = "\n".join([*lines, TYPES[self.kind][1]])
        return f"Question: {self.instructions}\n{body}" if self.instructions else body


def _invalid(message: str, where: str | None = None):
    return fail(Reason.INVALID_REQUEST, message, where)


def _options(qid: str, kind: str, criteria) -> list[tuple[str, str | None]]:
    if kind == "choice":
        if not isinstance(criteria, dict) or not criteria:
            raise _invalid(f"question {qid!r}: choice criteria must map option names to a description or null")
        return [(str(name), None if about is None else str(about)) for name, about in criteria.items()]
    if kind == "noul":
        if criteria is not None and (not isinstance(criteria, dict) or not criteria.keys() <= {"true", "false"}):
            raise _invalid(f"question {qid!r}: noul criteria must be an object with true and false")
        sides = criteria or {}
        return [
            (name, None if sides.get(key) is None else str(sides[key]))
            for name, key in (("yes", "true"), ("no", "false"))
        ]
    if not isinstance(criteria, list) or len(criteria) < 2:
        raise _invalid(f"question {qid!r}: score criteria must be an ordered list of levels")
    return [(str(level), None) for level in criteria]


def _question(qid: str, spec) -> Question:
    where = f"questions.{clip(qid, QUOTE_CHARS)}"
    if not qid:
        raise _invalid("question ids must be non-empty", "questions")
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        raise _invalid(f"`{where}` must be an object with a `type`", where)
    extra = set(spec) - {"type", "instructions", "criteria"}
    if extra:
        raise fail(Reason.UNSUPPORTED_FIELD, f"question {qid!r}: unknown field(s) {sorted(extra)}", where)
    kind = spec["type"]
    if kind not in TYPES:
        raise _invalid(
            f"unknown question type {clip(kind, QUOTE_CHARS)!r}; supported: {sorted(TYPES)}", f"{where}.type"
        )
    options = _options(qid, kind, spec.get("criteria"))
    if len({name for name, _ in options}) != len(options):
        raise _invalid(f"question {qid!r}: duplicate option names", f"{where}.criteria")
    if len(options) > len(TYPES[kind][0]):
        raise _invalid(f"question {qid!r}: at most {len(TYPES[kind][0])} options for this model", f"{where}.criteria")
    instructions = spec.get("instructions", "")
    instructions = instructions if isinstance(instructions, str) else "" if instructions is None else str(instructions)
    return Question(qid, kind, instructions, tuple(options))


def parse(body: bytes) -> tuple[list[Question], dict, str]:
    """The questions, the chat fields every read shares (label_reads.read_all) and the state's text."""
    data = {k: v for k, v in load_object(body).items() if v is not None}
    for name in data:
        if name not in FIELDS:
            raise fail(Reason.UNSUPPORTED_FIELD, f"`{clip(name, QUOTE_CHARS)}` is not a field this API takes", name)
    if "state" not in data:
        raise fail(Reason.MISSING_PROMPT, "`state` is required", "state")
    questions = data.get("questions")
    if not isinstance(questions, dict):
        raise _invalid("`questions` must map question ids to questions", "questions")
    if not questions:
        raise _invalid("questions: needs at least one question", "questions")
    if len(questions) > MAX_QUESTIONS:
        raise _invalid(f"questions: at most {MAX_QUESTIONS} for this model", "questions")
    parsed = [_question(qid, spec) for qid, spec in questions.items()]
    media = [name for name in MEDIA if data.get(name)]
    if media:
        modalities = ", ".join(sorted(MEDIA[name] for name in media))
        raise fail(Reason.UNSUPPORTED_FIELD, f"this model does not take {modalities} inputs", media[0])
    if data.get("joint", False) is not False:
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            "joint: this model reads each question on its own; joint reads need DiffusionGemma",
            "joint",
        )
    kwargs = data.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise _invalid("`chat_template_kwargs` must be an object", "chat_template_kwargs")
    if kwargs.get("enable_thinking"):
        raise _invalid("a read is the reply's first token, so thinking must be off", "chat_template_kwargs")
    if not isinstance(data.get("instructions", ""), str):
        raise _invalid("`instructions` must be a string", "instructions")
    shared = {name: data[name] for name in ("model", "cache_salt", "priority", "chat_template_kwargs") if name in data}
    shared["system"] = data.get("instructions", "")
    shared["request_id"] = f"decision-{data.get('request_id') or uuid.uuid4().hex}"
    state = data["state"]
    return parsed, shared, state if isinstance(state, str) else json.dumps(state, ensure_ascii=False)


def answer_of(question: Question, read: Read) -> dict:
    probs, mass = read.probs(), read.label_mass()
    top = max(range(len(probs)), key=probs.__getitem__)
    names = [name for name, _ in question.options]
    if question.kind == "choice":
        return {"type": "choice", "choice": names[top], "probabilities": dict(zip(names, probs)),
                "confidence": probs[top] * mass}  # fmt: skip
    if question.kind == "noul":
        return {"type": "noul", "noul": probs[0], "probabilities": {"yes": probs[0], "no": probs[1]},
                "confidence": max(probs) * mass}  # fmt: skip
    return {
        "type": "score",
        "score": sum(i * p for i, p in enumerate(probs)),
        "legend": {str(i): name for i, name in enumerate(names)},
        "probabilities": {str(i): p for i, p in enumerate(probs)},
        "confidence": probs[top] * mass,
    }


async def structured_decision(hops, tokens: LabelTokens, body: bytes, context) -> dict:
    questions, shared, state = parse(body)
    asks = [Ask(f"{state}\n\n{q.prompt()}", q.labels) for q in questions]
    reads = await read_all(hops, tokens, asks, shared, context)
    return {
        "id": shared["request_id"],
        "object": "structured_decision",
        "created": int(time.time()),
        "model": reads[0].model,
        "answers": {q.id: answer_of(q, r) for q, r in zip(questions, reads)},
        "usage": {
            "input_tokens": sum(r.input_tokens for r in reads),
            "output_tokens": sum(r.output_tokens for r in reads),
        },
        "diagnostics": {
            q.id: {"label_mass": r.label_mass(), "argmax_is_label": r.argmax_is_label} for q, r in zip(questions, reads)
        },
        "joint": None,
    }
