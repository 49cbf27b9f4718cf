"""DerenderContext.reasoning_delivery, the same through the stateful stream, the stateless twin and the unary call:
WHOLE sends the reasoning in one delta when its block closes (SGLang's `stream_reasoning: false`), OMITTED leaves
it out (vLLM's `include_reasoning: false`); the content is the same either way."""

from __future__ import annotations

import pytest

from scaleout.v1 import common_pb2, derender_pb2
from tests.derender.calls import chat_text, engine_messages, stream, twin

TEXT = "<think>Two plus two makes four.</think>It is 4."
WHOLE, OMITTED = derender_pb2.REASONING_DELIVERY_WHOLE, derender_pb2.REASONING_DELIVERY_OMITTED


def _context(delivery: derender_pb2.ReasoningDelivery) -> derender_pb2.DerenderContext:
    return derender_pb2.DerenderContext(id="chatcmpl-deliver", reasoning_parser="think", reasoning_delivery=delivery)


def _one_token_each(hf_tokenizer, text: str, **finish) -> list:
    return engine_messages([[i] for i in hf_tokenizer.encode(text, add_special_tokens=False)], **finish)


def _deltas(responses) -> list[tuple[str, str]]:
    """(reasoning, content) of each chunk that carries either."""
    out = []
    for response in responses:
        for choice in response.chat.choices:
            if choice.delta.reasoning_content or choice.delta.content:
                out.append((choice.delta.reasoning_content, choice.delta.content))
    return out


async def test_whole_reasoning_comes_in_one_delta_before_the_content(stub, hf_tokenizer):
    messages = _one_token_each(hf_tokenizer, TEXT)
    for responses in (await stream(stub, _context(WHOLE), messages), await twin(stub, _context(WHOLE), messages)):
        deltas = _deltas(responses)
        reasoned = [i for i, (reasoning, _) in enumerate(deltas) if reasoning]
        assert reasoned == [0] and deltas[0][0] == "Two plus two makes four."
        assert chat_text(responses)["content"] == "It is 4."
        assert len(deltas) > 2  # the content still streams as it comes
    unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=_context(WHOLE), results=messages))
    assert (unary.choices[0].message.reasoning_content, unary.choices[0].message.content) == (
        "Two plus two makes four.",
        "It is 4.",
    )


async def test_whole_reasoning_cut_short_comes_at_the_end(stub, hf_tokenizer):
    messages = _one_token_each(hf_tokenizer, "<think>Still thinking about", finish=common_pb2.FINISH_REASON_LENGTH)
    for responses in (await stream(stub, _context(WHOLE), messages), await twin(stub, _context(WHOLE), messages)):
        assert _deltas(responses) == [("Still thinking about", "")]
        assert [c.finish_reason for c in responses[-1].chat.choices] == ["length"]


@pytest.mark.parametrize("text", [TEXT, "<think>Only reasoning, cut short"])
async def test_omitted_reasoning_is_nowhere(stub, hf_tokenizer, text):
    messages = _one_token_each(hf_tokenizer, text)
    content = text.partition("</think>")[2]
    for responses in (await stream(stub, _context(OMITTED), messages), await twin(stub, _context(OMITTED), messages)):
        assert chat_text(responses) == {"content": content, "reasoning": ""}
    unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=_context(OMITTED), results=messages))
    message = unary.choices[0].message
    assert not message.HasField("reasoning_content") or not message.reasoning_content
    assert message.content == content
