"""Stop strings that span chunks and tokens: cut position, stop_reason and the early-stop signal, the same
through the stateful stream, the stateless twin and the unary call."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaleout.v1 import common_pb2, derender_pb2, engine_pb2
from tests.derender.calls import chat_text, engine_messages, finish, split, stream, twin

STOPS = ["###", "</s>", "停止", "🎉!", "\n\nUser:", "aa"]
TEXT = st.lists(st.sampled_from(list("ab #</s>停止🎉! \nUser:xyz你好")), max_size=30).map("".join)


def expected_cut(text: str, stops: list[str], include: bool):
    """Brute force: the first stop string to complete (the longest when several complete together)."""
    for end in range(1, len(text) + 1):
        done = [s for s in stops if text[:end].endswith(s)]
        if done:
            stop = max(done, key=len)
            return (text[:end] if include else text[: end - len(stop)]), stop
    return text, None


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    before=TEXT,
    stop_at=st.sampled_from(STOPS),
    after=TEXT,
    stops=st.lists(st.sampled_from(STOPS), min_size=1, max_size=3, unique=True),
    include=st.booleans(),
    cuts=st.lists(st.integers(1, 4), max_size=30),
)
async def test_stop_string_across_chunks(stub, hf_tokenizer, info, before, stop_at, after, stops, include, cuts):
    text = before + stop_at + after
    ids = hf_tokenizer.encode(text, add_special_tokens=False)
    content, stop = expected_cut(text, stops, include)
    context = derender_pb2.DerenderContext(
        id="chatcmpl-stop",
        stop=stops,
        include_stop_str_in_output=include,
        tokenizer_fingerprint=info.fingerprint,
        include_usage=True,
    )
    messages = engine_messages(split(ids, cuts) or [[]])
    decode = info.tokenizer.decode
    used = next((k for k in range(1, len(ids) + 1) if any(s in decode(ids[:k]) for s in stops)), len(ids))
    for responses in (await stream(stub, context, messages), await twin(stub, context, messages)):
        assert chat_text(responses)["content"] == content
        assert responses[-1].chat.usage.completion_tokens == used  # up to the token that completed the stop
        if stop is None:
            assert finish(responses) == ("stop", None, None, False)
        else:
            assert finish(responses) == ("stop", "stop_str", stop, True)
            signalled = [r for r in responses if r.stop_generation]
            assert len(signalled) == 1 and signalled[0].chat.choices[0].finish_reason == "stop"
    unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))
    assert unary.choices[0].message.content == content
    assert (unary.choices[0].stop_str or None) == stop
    assert unary.usage.completion_tokens == used


async def test_trailing_stop_token_is_not_text(stub, hf_tokenizer, info):
    ids = hf_tokenizer.encode("The end.", add_special_tokens=False) + [2]
    context = derender_pb2.DerenderContext(id="chatcmpl-eos", skip_special_tokens=False)
    messages = engine_messages([ids[:2], ids[2:]], stop_token_id=2)
    responses = await stream(stub, context, messages)
    assert chat_text(responses)["content"] == "The end."
    assert finish(responses) == ("stop", "stop_token_id", 2, False)
    unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))
    assert unary.choices[0].message.content == "The end."
    assert unary.usage.completion_tokens == len(ids) and unary.usage.prompt_tokens == 7


async def test_a_kept_stop_token_is_text(stub, hf_tokenizer, info):
    """include_stop_str_in_output (SGLang's no_stop_trim) keeps the stop token's text too, as vLLM's detokenizer
    does; special tokens skipped stay out of the text either way."""
    ids = hf_tokenizer.encode("The end.", add_special_tokens=False) + [2]
    messages = engine_messages([ids[:2], ids[2:]], stop_token_id=2)
    for skip, content in (
        (False, "The end." + info.tokenizer.decode([2], skip_special_tokens=False)),
        (True, "The end."),
    ):
        context = derender_pb2.DerenderContext(
            id="chatcmpl-eos", skip_special_tokens=skip, include_stop_str_in_output=True
        )
        for responses in (await stream(stub, context, messages), await twin(stub, context, messages)):
            assert chat_text(responses)["content"] == content
        unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))
        assert unary.choices[0].message.content == content


async def test_stop_generation_waits_for_every_choice(stub, hf_tokenizer):
    """n=2: choice 0 hits a stop string early, choice 1 runs on; the engine may stop only when both are done."""
    words = [hf_tokenizer.encode(w, add_special_tokens=False) for w in ["one", " two", " STOP", " three", " four"]]
    context = derender_pb2.DerenderContext(id="chatcmpl-n2", n=2, stop=["STOP"])
    messages = []
    for step, word in enumerate(words):
        message = engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(index=0, token_ids=word)])
        other = word if step != 2 else hf_tokenizer.encode(" go", add_special_tokens=False)
        choice = message.choices.add(index=1, token_ids=other)
        if step == 3:
            choice.finish_reason = common_pb2.FINISH_REASON_LENGTH
        messages.append(message)
    for responses in (await stream(stub, context, messages), await twin(stub, context, messages)):
        flags = [r.stop_generation for r in responses]
        assert flags.count(True) == 1
        finishing = responses[flags.index(True)].chat.choices
        assert [(c.index, c.finish_reason) for c in finishing if c.finish_reason] == [(1, "length")]


async def test_usage_when_the_caller_stops_early(stub, hf_tokenizer):
    """After stop_generation the caller aborts the engine and half-closes: the stream still ends with usage."""
    ids = hf_tokenizer.encode("one two STOP three", add_special_tokens=False)
    context = derender_pb2.DerenderContext(id="chatcmpl-early", stop=["STOP"], include_usage=True)
    messages = engine_messages([[i] for i in ids])
    messages = messages[
        : next(
            i
            for i, m in enumerate(messages)
            if "STOP" in hf_tokenizer.decode([t for m in messages[: i + 1] for t in m.choices[0].token_ids])
        )
        + 1
    ]  # up to the stop, nothing after
    responses = await stream(stub, context, messages)
    assert finish(responses) == ("stop", "stop_str", "STOP", True)
    assert responses[-1].chat.usage.completion_tokens == len(messages)
