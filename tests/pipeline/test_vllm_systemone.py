"""vLLM's `/v1/systemone` (structured decisions): the field policy with vLLM's words, and, against vLLM 0.33's own
question types for the same questions, the prompt each read asks and the answers' math."""

from __future__ import annotations

import json

import pytest
from vllm.entrypoints.openai.decisions.question_types import build_question
from vllm.entrypoints.openai.decisions.strategies import state_text

from pipeline_svc.faces.vllm_systemone import answer_of, parse
from pipeline_svc.label_reads import Read
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason

QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "shipping": "boxes"}},
    "one": {"type": "choice", "instructions": "", "criteria": {"heads": None}},
    "urgent": {"type": "noul", "instructions": "Is money moving?"},
    "described": {"type": "noul", "instructions": "Refund?", "criteria": {"true": "a refund is due"}},
    "tone": {"type": "score", "instructions": 3, "criteria": ["calm", "annoyed", "furious"]},
}


def request(**fields) -> bytes:
    return json.dumps({"model": "m", "state": "x", "questions": QUESTIONS} | fields).encode()


@pytest.mark.parametrize("state", ["Team: billing.", {"team": "billing", "langue": "français"}])
def test_each_read_asks_what_vllm_asks(state):
    questions, shared, text = parse(request(state=state, instructions="Be brief.", request_id="r1"))
    assert text == state_text(state)
    assert shared == {"model": "m", "system": "Be brief.", "request_id": "decision-r1"}
    for question, (qid, spec) in zip(questions, QUESTIONS.items()):
        theirs = build_question(qid, spec["type"], spec.get("instructions"), spec.get("criteria"), 26)
        assert question.id == qid and question.prompt() == theirs.type.prompt(theirs)
        assert question.labels == theirs.labels


@pytest.mark.parametrize("seed", range(3))
def test_answers_are_vllms_for_the_same_label_logprobs(seed):
    questions, _, _ = parse(request())
    for i, (question, (qid, spec)) in enumerate(zip(questions, QUESTIONS.items())):
        logprobs = [-(((seed + 2) * (j + 5) * 31 + i) % 53) / 9 - 0.1 for j in range(len(question.options))]
        read = Read(logprobs, True, 1, 0, 1, "m")
        theirs = build_question(qid, spec["type"], spec.get("instructions"), spec.get("criteria"), 26)
        assert answer_of(question, read) == theirs.type.answer(theirs, read.probs(), read.label_mass())


@pytest.mark.parametrize(
    ("fields", "param", "words"),
    [
        ({"questions": {"q": {"type": "choice", "criteria": {"a": None}, "depends_on": ["x"]}}}, "questions.q",
         "unknown field(s)"),
        ({"questions": {f"q{i}": {"type": "noul"} for i in range(65)}}, "questions", "at most 64"),
        ({"questions": {"q": {"type": "noul", "criteria": ["yes", "no"]}}}, None, "must be an object"),
        ({"questions": {"q": {"type": "score", "criteria": ["calm"]}}}, None, "ordered list of levels"),
        ({"questions": {"q": {"type": "choice", "criteria": {str(i): None for i in range(27)}}}},
         "questions.q.criteria", "at most 26 options"),
        ({"questions": {"q": {"type": "rank"}}}, "questions.q.type", "unknown question type"),
        ({"questions": {}}, "questions", "needs at least one question"),
        ({"chat_template_kwargs": {"enable_thinking": True}}, "chat_template_kwargs", "thinking must be off"),
        ({"images": ["https://example.com/a.png"]}, "images", "does not take image inputs"),
        ({"joint": True}, "joint", "joint reads need DiffusionGemma"),
        ({"top_k": 3}, "top_k", "not a field"),
    ],
)  # fmt: skip
def test_refusals_carry_vllms_words(fields, param, words):
    with pytest.raises(ServiceError) as refused:
        parse(request(**fields))
    assert words in refused.value.message
    assert (refused.value.violations[0][0] if refused.value.violations else None) == param
    assert refused.value.reason in (Reason.INVALID_REQUEST, Reason.UNSUPPORTED_FIELD)
