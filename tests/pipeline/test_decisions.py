"""OpenAI's `/v1/decisions` field policy (every field honoured or refused, named) and, against vLLM 0.33's own
classes for the same bodies, the question each read asks, the input text, the answers' math and shapes."""

from __future__ import annotations

import json
import math

import pytest
from vllm.entrypoints.openai.decisions.adapters import input_text, make_answer, make_read_question
from vllm.entrypoints.openai.decisions.protocol import DecisionRequest, DecisionResponse

from pipeline_svc.decisions import answer_of, question_text
from pipeline_svc.decisions_request import decision_request
from pipeline_svc.label_reads import Read
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason

QUESTIONS = [
    {"type": "predicate", "instructions": "Is the screen broken?"},
    {"type": "predicate", "instructions": "", "name": "empty"},
    {
        "type": "choice",
        "name": "department",
        "instructions": "Which department should handle this?",
        "choices": [{"value": "returns"}, {"value": "billing", "description": "payments"}, {"value": True}],
    },
    {"type": "choice", "instructions": "Ünïcode?", "choices": [{"value": "日本"}, {"value": "true"}]},
    {
        "type": "score",
        "name": "damage",
        "instructions": "Rate the damage.",
        "levels": [{"label": "undamaged"}, {"label": "scratched", "description": "marks only"}, {"label": "broken"}],
    },
]
INPUTS = [
    "The package arrived with a broken screen.",
    [
        {"role": "user", "content": "First."},
        {"role": "user", "type": "message", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
    ],
]  # fmt: skip


def body(**fields) -> dict:
    return {"model": "m", "input": INPUTS[0], "questions": QUESTIONS} | fields


def parse(**fields):
    return decision_request(json.dumps(body(**fields)).encode())


@pytest.mark.parametrize("raw_input", INPUTS)
def test_each_read_asks_what_vllms_asks_of_the_same_body(raw_input):
    ours = parse(input=raw_input)
    theirs = DecisionRequest.model_validate(body(input=raw_input))
    assert ours.input == input_text(theirs.input) and ours.system == ""
    for i, (question, vllm_question) in enumerate(zip(ours.questions, theirs.questions)):
        read = make_read_question(i, vllm_question)
        assert question_text(question) == read.type.prompt(read)
        assert question.name == vllm_question.name


@pytest.mark.parametrize("seed", range(4))
def test_answers_are_vllms_for_the_same_letter_logprobs(seed):
    """vLLM's adapters from the same letters' logprobs (renormalized, and their total mass), through its response
    model: the same JSON."""
    theirs = DecisionRequest.model_validate(body())
    answers, expected = [], []
    for i, (question, vllm_question) in enumerate(zip(parse().questions, theirs.questions)):
        logprobs = [-(((seed + 1) * (j + 3) * 7919 + i) % 97) / 10 - 0.05 for j in range(len(question.options))]
        top = max(logprobs)
        weights = [math.exp(lp - top) for lp in logprobs]
        probs = [w / sum(weights) for w in weights]
        expected.append(make_answer(vllm_question, probs, sum(math.exp(lp) for lp in logprobs)))
        answers.append(answer_of(question, Read(logprobs, True, 1, 0, 1, "m")))
    usage = {"input_tokens": 1, "input_tokens_details": {}, "output_tokens": 1, "output_tokens_details": {},
             "total_tokens": 2}  # fmt: skip
    ours = DecisionResponse.model_validate({"model": "m", "answers": answers, "usage": usage}).model_dump()
    want = DecisionResponse(model="m", answers=expected, usage=usage).model_dump()  # type: ignore[arg-type]
    assert json.dumps(ours) == json.dumps(want)


def test_system_developer_messages_and_json_parts_are_read():
    parsed = parse(
        input=[
            {"role": "system", "content": "Be strict."},
            {"role": "developer", "content": [{"type": "input_text", "text": "Tickets."}]},
            {"role": "user", "content": [{"type": "input_json", "data": {"id": 7, "note": "é"}}]},
        ],
        prompt_cache_key="k",
        cache_salt="s",
        safety_identifier="u1",
        prompt_cache_options={"mode": "implicit"},
        joint=False,
    )
    assert parsed.system == "Be strict.\n\nTickets." and parsed.input == '{"id": 7, "note": "é"}'
    assert parsed.routing == {"prompt_cache_key": "k", "cache_salt": "s"}
    assert parsed.identity == {"safety_identifier": "u1"}


REFUSED = [
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]",
     Reason.UNSUPPORTED_FIELD),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]}, "input[0].type",
     Reason.UNSUPPORTED_FIELD),
    ({"input": [{"role": "assistant", "content": "x"}]}, "input[0].role", Reason.UNSUPPORTED_FIELD),
    ({"input": [{"role": "critic", "content": "x"}]}, "input[0].role", Reason.INVALID_ROLE),
    ({"input": [{"role": "system", "content": "x"}]}, "input", Reason.MISSING_PROMPT),
    ({"input": []}, "input", Reason.INVALID_REQUEST),
    ({"input": [{"role": "user", "content": "x", "phase": "final_answer"}]}, "input[0].phase", Reason.UNSUPPORTED_FIELD),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "x",
                                              "prompt_cache_breakpoint": {"mode": "explicit"}}]}]},
     "input[0].content[0].prompt_cache_breakpoint", Reason.UNSUPPORTED_FIELD),
    ({"joint": True}, "joint", Reason.UNSUPPORTED_FIELD),
    ({"joint": "yes"}, "joint", Reason.INVALID_REQUEST),
    ({"prompt_cache_options": {"mode": "explicit"}}, "prompt_cache_options.mode", Reason.UNSUPPORTED_FIELD),
    ({"prompt_cache_options": {"ttl": "30m"}}, "prompt_cache_options.ttl", Reason.UNSUPPORTED_FIELD),
    ({"stream": True}, "stream", Reason.UNSUPPORTED_FIELD),
    ({"questions": []}, "questions", Reason.INVALID_REQUEST),
    ({"questions": [QUESTIONS[0]] * 65}, "questions", Reason.INVALID_REQUEST),
    ({"questions": [{"type": "rank", "instructions": "?"}]}, "questions[0].type", Reason.INVALID_REQUEST),
    ({"questions": [{"type": "predicate"}]}, "questions[0].instructions", Reason.INVALID_REQUEST),
    ({"questions": [{"type": "predicate", "instructions": "?", "choices": []}]}, "questions[0].choices",
     Reason.UNSUPPORTED_FIELD),
    ({"questions": [{"type": "predicate", "instructions": "?", "name": 3}]}, "questions[0].name", Reason.INVALID_REQUEST),
    ({"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": "a"}]}]}, "questions[0].choices",
     Reason.INVALID_REQUEST),
    ({"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": "a"}, {"value": "a"}]}]},
     "questions[0].choices", Reason.INVALID_REQUEST),
    ({"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": str(i)} for i in range(27)]}]},
     "questions[0].choices", Reason.INVALID_REQUEST),
    ({"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": 1}, {"value": 2}]}]},
     "questions[0].choices[0].value", Reason.INVALID_REQUEST),
    ({"questions": [{"type": "score", "instructions": "?", "levels": [{"label": str(i)} for i in range(11)]}]},
     "questions[0].levels", Reason.INVALID_REQUEST),
    ({"questions": [{"type": "score", "instructions": [{"type": "input_image", "image_url": "x"}],
                     "levels": [{"label": "a"}, {"label": "b"}]}]}, "questions[0].instructions[0]",
     Reason.UNSUPPORTED_FIELD),
    ({"safety_identifier": "x" * 129}, "safety_identifier", Reason.INVALID_REQUEST),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "param", "reason"), REFUSED)
def test_what_cannot_be_honoured_is_refused_naming_it(fields, param, reason):
    with pytest.raises(ServiceError) as refused:
        parse(**fields)
    assert refused.value.reason == reason and refused.value.violations[0][0] == param


def test_two_choices_equal_as_text_but_typed_apart_are_distinct():
    parsed = parse(questions=[{"type": "choice", "instructions": "?", "choices": [{"value": True}, {"value": "true"}]}])
    assert [name for name, _ in parsed.questions[0].options] == ["true", '"true"']
