"""The answers to OpenAI's `/v1/decisions` (decisions_request.py reads the body): one label read per question
(label_reads.py), asked as vLLM's next-token strategy asks it (vLLM 0.33, entrypoints/openai/decisions), on any
chat model whose prompt takes each option letter as one token.

- A read's user turn is the input, a blank line, then `Question: <instructions>`, a line per option
  (`A: <option> - <description>`; a predicate's options are `false` and `true`, a choice's its values as JSON, a
  score's its level labels) and `Answer with the letter of one option only.`; the input's system / developer
  messages are its system message.
- The answer: the letters' probabilities renormalized among themselves; a predicate's `probability` is `true`'s,
  a choice's `choice` and a score's expected `score` (levels numbered from 0) follow from them, and `confidence`
  is the top option's share times the letters' total probability (low where the model wanted another token), as
  vLLM computes them.
- Usage sums the reads: `input_tokens` the prompts, `output_tokens` one a read, `cached_tokens` what the prefix
  cache held, `cache_write_tokens` the prompt tokens computed (the cache keeps them).
"""

from __future__ import annotations

from pipeline_svc.decisions_request import DecisionRequest, Question
from pipeline_svc.label_reads import ANSWER_LETTER, LETTERS, Ask, LabelTokens, Read, read_all


def question_text(question: Question) -> str:
    lines = [f"{label}: {name} - {about}" if about else f"{label}: {name}" for label, (name, about) in
             zip(LETTERS, question.options)]  # fmt: skip
    body = "\n".join([*lines, ANSWER_LETTER])
    return f"Question: {question.instructions}\n{body}" if question.instructions else body


def answer_of(question: Question, read: Read) -> dict:
    probs = read.probs()
    if question.kind == "predicate":
        return {"type": "predicate", "name": question.name, "probability": probs[1]}
    top = max(range(len(probs)), key=probs.__getitem__)
    out = {"type": question.kind, "name": question.name}
    if question.kind == "choice":
        out["choice"] = question.values[top]
        out["probabilities"] = [{"value": v, "probability": p} for v, p in zip(question.values, probs)]
    else:
        out["score"] = sum(i * p for i, p in enumerate(probs))
        out["probabilities"] = [
            {"value": i, "label": label, "probability": p} for i, (label, p) in enumerate(zip(question.values, probs))
        ]
    return out | {"confidence": probs[top] * read.label_mass()}


async def decide(hops, tokens: LabelTokens, request: DecisionRequest, request_id: str, context) -> dict:
    """The API's answer: every question read concurrently, answered in order."""
    asks = [Ask(f"{request.input}\n\n{question_text(q)}", LETTERS[: len(q.options)]) for q in request.questions]
    shared = {"model": request.model, "request_id": request_id, "system": request.system, **request.routing}
    reads = await read_all(hops, tokens, asks, shared, context)
    prompt, cached = sum(r.input_tokens for r in reads), sum(r.cached_tokens for r in reads)
    output = sum(r.output_tokens for r in reads)
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": prompt - cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output,
    }
    answers = [answer_of(q, r) for q, r in zip(request.questions, reads)]
    return {"model": reads[0].model, "answers": answers, "usage": usage}
