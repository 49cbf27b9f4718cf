"""Random token sequences of the default tokenizer, split into random chunks, stream to exactly the one-shot
decode with the same flags: through the stateful stream, the stateless twin and the unary call, over gRPC."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaleout.v1 import derender_pb2
from tests.derender.calls import chat_text, engine_messages, split, stream, twin

ALPHABET = st.sampled_from(
    list("abcdefghij XYZ,.!?\n\t")
    + list("éèàüßçñøÅ")
    + list("你好世界中文字")
    + list("日本語のテキスト")
    + ["🎉", "😀", "👍🏽", "🇫🇷", "∑", "€"]
    + ["  ", " \n"]
)
SPECIAL_IDS = list(range(17))  # <|endoftext|>, <|im_start|>, <|im_end|>, <repo_name>, ...


TEXT = st.lists(ALPHABET, min_size=1, max_size=12).map("".join)
RAW_IDS = st.lists(st.integers(17, 49151), min_size=1, max_size=4)  # any ids, lone UTF-8 bytes included
PIECES = st.lists(st.one_of(TEXT, st.sampled_from(SPECIAL_IDS), RAW_IDS), min_size=1, max_size=8)


def encode(tokenizer, pieces) -> list[int]:
    ids = []
    for piece in pieces:
        if isinstance(piece, str):
            piece = tokenizer.encode(piece, add_special_tokens=False)
        ids += [piece] if isinstance(piece, int) else piece
    return ids


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    pieces=PIECES,
    cuts=st.lists(st.integers(1, 6), max_size=40),
    skip=st.booleans(),
    tail=st.sampled_from(["", "<|im_start|>assistant\n", "Hello", "你"]),
)
async def test_stream_equals_one_shot_decode(stub, hf_tokenizer, info, pieces, cuts, skip, tail):
    ids = encode(hf_tokenizer, pieces)
    expected = info.tokenizer.decode(ids, skip_special_tokens=skip)
    context = derender_pb2.DerenderContext(
        id="chatcmpl-prop",
        skip_special_tokens=skip,
        tokenizer_fingerprint=info.fingerprint,
        prompt_tail_token_ids=hf_tokenizer.encode(tail, add_special_tokens=False),
    )
    messages = engine_messages(split(ids, cuts))
    streamed = chat_text(await stream(stub, context, messages))["content"]
    stateless = chat_text(await twin(stub, context, messages))["content"]
    unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))
    assert streamed == expected
    assert stateless == expected
    assert unary.choices[0].message.content == expected
