"""OpenAI's Decisions API (`client.decisions.create`, vLLM's `/v1/decisions`) through the official SDK on the real
stack: each answer is the engine's greedy reading of the option letters (the same chat scored by
`/v1/chat/completions` with `logprob_token_ids`), in the API's shapes, with vLLM's bounds and words; what it cannot
honour is refused naming the field."""

from __future__ import annotations

import json
import math

import openai
import pytest
import requests
from vllm.entrypoints.openai.decisions.protocol import DecisionResponse

from pipeline_svc.decisions import question_text
from pipeline_svc.decisions_request import decision_request

pytestmark = pytest.mark.slow

INPUT = "The package arrived with a broken screen."
QUESTIONS = [
    {"type": "predicate", "instructions": "Is the screen broken?"},
    {
        "type": "choice",
        "name": "department",
        "instructions": "Which department should handle this?",
        "choices": [{"value": "returns"}, {"value": "billing", "description": "payments"}, {"value": True}],
    },
    {
        "type": "score",
        "name": "damage",
        "instructions": "Rate the damage.",
        "levels": [{"label": "undamaged"}, {"label": "scratched"}, {"label": "broken"}],
    },
]


def test_answers_have_the_apis_shapes_and_follow_from_the_letters(client, model_id):
    raw = client.decisions.with_raw_response.create(model=model_id, input=INPUT, questions=QUESTIONS)
    DecisionResponse.model_validate(raw.http_response.json())  # vLLM's response model takes it as it is
    decision = raw.parse()
    predicate, choice, score = decision.answers
    assert decision.model == model_id
    assert predicate.type == "predicate" and predicate.name is None and 0 <= predicate.probability <= 1
    assert choice.type == "choice" and choice.name == "department"
    assert [p.value for p in choice.probabilities] == ["returns", "billing", True]
    assert sum(p.probability for p in choice.probabilities) == pytest.approx(1)
    assert choice.choice == max(choice.probabilities, key=lambda p: p.probability).value
    assert 0 < choice.confidence <= max(p.probability for p in choice.probabilities)
    assert score.type == "score" and [p.label for p in score.probabilities] == ["undamaged", "scratched", "broken"]
    assert [p.value for p in score.probabilities] == [0, 1, 2]
    assert score.score == pytest.approx(sum(p.value * p.probability for p in score.probabilities))
    usage = decision.usage
    assert usage.output_tokens == 3 and usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens + usage.input_tokens_details.cache_write_tokens == (
        usage.input_tokens
    )
    assert usage.output_tokens_details.reasoning_tokens == 0


def test_a_read_is_the_chat_routes_greedy_letter_distribution(client, model_id, stack):
    """The predicate's probability is `true`'s (letter B) among A and B, as the chat route scores the same chat."""
    question = QUESTIONS[0]
    decision = client.decisions.create(model=model_id, input=INPUT, questions=[question])
    parsed = decision_request(
        json.dumps({"model": model_id, "input": INPUT, "questions": [question]}).encode()
    ).questions[0]
    ids = [  # each letter's token as a reply's start: the template continuing an assistant turn of that letter
        requests.post(
            f"{stack.rest_url}/tokenize",
            json={"model": model_id, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": letter}],
                  "add_generation_prompt": False, "continue_final_message": True},
            timeout=30,
        ).json()["tokens"][-1]
        for letter in "AB"
    ]  # fmt: skip
    chat = client.chat.completions.create(
        model=model_id,
        messages=[{"role": "user", "content": f"{INPUT}\n\n{question_text(parsed)}"}],
        max_tokens=1,
        temperature=0,
        logprobs=True,
        extra_body={"logprob_token_ids": ids, "chat_template_kwargs": {"enable_thinking": False}},
    )
    assert chat.choices[0].logprobs is not None
    top = chat.choices[0].logprobs.content[0].top_logprobs
    a, b = (math.exp(t.logprob) for t in top[:2])
    assert decision.answers[0].probability == pytest.approx(b / (a + b), rel=1e-3)


def test_message_input_and_a_second_identical_call_hits_the_cache(client, model_id):
    messages = [
        {"role": "developer", "content": "You triage support tickets."},
        {"role": "user", "content": [{"type": "input_text", "text": INPUT}, {"type": "input_json", "data": {"id": 7}}]},
    ]
    first = client.decisions.create(model=model_id, input=messages, questions=QUESTIONS[:2])
    again = client.decisions.create(model=model_id, input=messages, questions=QUESTIONS[:2])
    assert again.answers[0].probability == pytest.approx(first.answers[0].probability, abs=1e-3)
    assert [p.probability for p in again.answers[1].probabilities] == pytest.approx(
        [p.probability for p in first.answers[1].probabilities], abs=1e-3
    )
    assert again.usage.input_tokens_details.cached_tokens > first.usage.input_tokens_details.cached_tokens


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]",
         "text input only"),
        ({"joint": True}, "joint", "reads each question on its own"),
        ({"prompt_cache_options": {"mode": "explicit"}}, "prompt_cache_options.mode", "implicit"),
        ({"prompt_cache_options": {"ttl": "30m"}}, "prompt_cache_options.ttl", "no lifetime"),
        ({"temperature": 0.5}, "temperature", "not a field"),
        ({"input": [{"role": "assistant", "content": "hi"}]}, "input[0].role", "not supported"),
        ({"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": "a"}, {"value": "a"}]}]},
         "questions[0].choices", "distinct"),
        ({"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": str(i)} for i in range(27)]}]},
         "questions[0].choices", "at most 26"),
        ({"questions": [QUESTIONS[0]] * 65}, "questions", "at most 64"),
        ({"questions": [{"type": "score", "instructions": "?", "levels": [{"label": "x"}]}]},
         "questions[0].levels", "2 to 10"),
    ],
)  # fmt: skip
def test_refusals_name_the_field(client, model_id, body, param, words):
    request = {"model": model_id, "input": INPUT, "questions": QUESTIONS[:1]} | body
    with pytest.raises(openai.BadRequestError) as refused:
        client.post("/decisions", cast_to=dict, body=request)
    assert isinstance(refused.value.body, dict) and refused.value.body["param"] == param
    assert words in refused.value.body["message"]


def test_vllms_structured_decisions_route_answers_by_question_id(stack, model_id):
    """vLLM's `/v1/systemone`: the same reads with vLLM's labels (letters, yes / no, digits) and its answer shape."""
    questions = {
        "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "shipping": None}},
        "coin": {"type": "choice", "instructions": "How did the coin land?", "criteria": {"heads": None}},
        "urgent": {"type": "noul", "instructions": "Is money moving?"},
        "tone": {"type": "score", "instructions": "How upset?", "criteria": ["calm", "annoyed", "furious"]},
    }
    body = {"model": model_id, "state": {"ticket": "Charged twice."}, "questions": questions, "request_id": "t1"}
    answer = requests.post(f"{stack.rest_url}/v1/systemone", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    decision = answer.json()
    assert decision["id"] == "decision-t1" and decision["object"] == "structured_decision"
    assert list(decision["answers"]) == list(questions) and decision["usage"]["output_tokens"] == 4
    coin, urgent, tone = (decision["answers"][q] for q in ("coin", "urgent", "tone"))
    assert coin["probabilities"] == {"heads": 1.0}
    assert coin["confidence"] == pytest.approx(decision["diagnostics"]["coin"]["label_mass"])
    assert urgent["noul"] == urgent["probabilities"]["yes"]
    assert tone["legend"] == {"0": "calm", "1": "annoyed", "2": "furious"}
    assert tone["score"] == pytest.approx(sum(i * p for i, p in enumerate(tone["probabilities"].values())))
    refused = requests.post(
        f"{stack.rest_url}/v1/systemone", json=body | {"chat_template_kwargs": {"enable_thinking": True}}, timeout=60
    )
    assert refused.status_code == 400 and "thinking must be off" in refused.json()["error"]["message"]


def test_sglangs_decisions_body_on_the_same_path(stack, model_id):
    """SGLang's `/v1/decisions` (questions with `id` and `question`): answers by id in its shape, its wording read
    (the prompt's ids, returned with `return_prompt_token_ids`, decode to it), `temperature` sharpening."""
    questions = [
        {"id": "team", "type": "choice", "question": "Which team?",
         "options": [{"name": "billing", "description": "payments"}, {"name": "shipping"}]},
        {"id": "tone", "type": "score", "question": "How upset?", "levels": ["calm", "annoyed", "furious"]},
        {"id": "urgent", "type": "yes_no", "question": "Is money moving?", "yes": "money moved"},
    ]  # fmt: skip
    body = {"model": model_id, "input": {"ticket": "Charged twice."}, "questions": questions}
    answer = requests.post(f"{stack.rest_url}/v1/decisions", json=body | {"return_prompt_token_ids": True}, timeout=60)
    assert answer.status_code == 200, answer.text
    decided = answer.json()
    assert decided["object"] == "decisions" and decided["prompt_format_version"] == 1
    team, tone, urgent = (decided["answers"][q] for q in ("team", "tone", "urgent"))
    assert team["choice"] == max(team["probabilities"], key=team["probabilities"].get)
    assert set(tone["probabilities"]) == {"0", "1", "2"} and set(urgent["probabilities"]) == {"yes", "no"}
    assert tone["score"] == pytest.approx(sum(i * p for i, p in enumerate(tone["probabilities"].values())))
    text = requests.post(
        f"{stack.rest_url}/detokenize", json={"model": model_id, "tokens": urgent["prompt_token_ids"]}, timeout=30
    ).json()["prompt"]
    assert '{"ticket":"Charged twice."}\n\nIs the following true? Is money moving?\nyes: money moved\n' in text
    assert len(urgent["label_token_ids"]) == 2
    sharp = requests.post(f"{stack.rest_url}/v1/decisions", json=body | {"temperature": 0.5}, timeout=60).json()
    yes, no = urgent["probabilities"]["yes"], urgent["probabilities"]["no"]
    assert sharp["answers"]["urgent"]["probabilities"]["yes"] == pytest.approx(yes**2 / (yes**2 + no**2), rel=1e-3)
    refused = requests.post(f"{stack.rest_url}/v1/decisions", json=body | {"prompt_format_version": 2}, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "prompt_format_version"
