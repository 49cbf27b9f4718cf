"""Tokenizers other than the default's ByteLevel BPE, trained here in a second: SentencePiece-style Metaspace
with byte fallback (leading spaces from the prompt tail, byte-fallback characters) and WordPiece (whose decoder
puts spaces between added tokens: spaces_between_special_tokens)."""

from __future__ import annotations

import json
import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from derender_svc.limits import Limits
from derender_svc.session import Defaults, Session
from derender_svc.tokenizer_info import TokenizerInfo
from scaleout.v1 import common_pb2, derender_pb2, engine_pb2

CORPUS = [
    "Hello world, this is a test.",
    "The café is naïve.",
    "Numbers 123 and symbols !?",
    "你好世界 hello",
    '[{"name": "f", "arguments": {"a": 1}}]',
] * 50


def metaspace() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(byte_fallback=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokenizer.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=specials))
    return tokenizer


def wordpiece() -> Tokenizer:
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(
        CORPUS, trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    )
    return tokenizer


def defaults(tokenizer: Tokenizer) -> Defaults:
    info = TokenizerInfo.from_hf(PreTrainedTokenizerFast(tokenizer_object=tokenizer))
    return Defaults(info, Limits(), "none", "none")


def run(defaults: Defaults, context, chunks) -> str:
    session, text = Session(context, defaults), []
    for i, ids in enumerate(chunks):
        choice = engine_pb2.GenerateChoice(token_ids=ids)
        if i == len(chunks) - 1:
            choice.finish_reason = common_pb2.FINISH_REASON_STOP
        text += [d.content for d in session.feed(engine_pb2.GenerateResponse(choices=[choice]))]
    return "".join(text)


def random_chunks(ids, rng):
    chunks, start = [], 0
    while start < len(ids):
        size = rng.randint(1, 4)
        chunks.append(ids[start : start + size])
        start += size
    return chunks


@pytest.mark.parametrize("seed", range(10))
def test_metaspace_keeps_leading_space_from_prompt_tail(seed):
    tokenizer, rng = metaspace(), random.Random(seed)
    setup = defaults(tokenizer)
    tail = tokenizer.encode("Numbers 123 and").ids
    ids = tokenizer.encode("Hello world, 你好 🎉 café").ids
    assert tokenizer.decode(ids).startswith("Hello")  # decoded alone, the leading space is gone
    context = derender_pb2.DerenderContext(prompt_tail_token_ids=tail)  # the byte tokens are added tokens here
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    expected = decode(tail + ids)[len(decode(tail)) :]
    assert expected.startswith(" Hello") and "🎉" in expected  # the emoji comes from byte-fallback tokens
    assert run(setup, context, random_chunks(ids, rng)) == expected
    assert b"".join(setup.info.token_bytes[i] for i in ids).decode() == expected  # logprob bytes


@pytest.mark.parametrize("spaces", [True, False])
def test_wordpiece_spaces_between_special_tokens(spaces):
    tokenizer = wordpiece()
    setup = defaults(tokenizer)
    assert setup.info.spaces_added_tokens
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    ids = tokenizer.encode("hello world").ids + [cls, sep, cls] + tokenizer.encode("test").ids
    context = derender_pb2.DerenderContext(spaces_between_special_tokens=spaces)
    text = run(setup, context, [[i] for i in ids])
    assert text == ("hello world [CLS] [SEP] [CLS] test" if spaces else "hello world [CLS][SEP][CLS] test")
    assert run(setup, context, [ids]) == text


def test_arbitrary_ids_never_break_the_stream():
    """Random ids (lone bytes, bytes completing later) make the decoder rewrite shown text: no error escapes."""
    tokenizer, rng = metaspace(), random.Random(1)
    setup = defaults(tokenizer)
    for _ in range(300):
        ids = [rng.randrange(tokenizer.get_vocab_size()) for _ in range(rng.randint(1, 12))]
        text = run(setup, derender_pb2.DerenderContext(), random_chunks(ids, rng))
        assert isinstance(text, str)


@pytest.mark.parametrize(
    "template,expected",
    [
        ("{{ '<tool_call>' }}", "hermes"),
        ("{{ '<|python_tag|>' }}", "llama3_json"),
        ("Call tools as [func_name1(params_name1=params_value1)]", "pythonic"),
        ("{{ '[TOOL_CALLS]' }}", "mistral"),
        ("{{ messages }}", "hermes"),
    ],
)
def test_default_tool_parser_follows_the_chat_template(template, expected):
    hf = PreTrainedTokenizerFast(tokenizer_object=wordpiece())
    hf.chat_template = template
    assert TokenizerInfo.from_hf(hf).tool_format == expected


def test_special_think_tokens_survive_skip_special_tokens():
    """A tokenizer whose <think>/</think> are special tokens: skipping specials must not hide the reasoning."""
    tokenizer = metaspace()
    tokenizer.add_special_tokens(["<think>", "</think>"])
    info = TokenizerInfo.from_hf(PreTrainedTokenizerFast(tokenizer_object=tokenizer))
    assert {"<think>", "</think>"} <= set(info.special_tokens.values())
    setup = Defaults(info, Limits(), "think", "none")
    ids = tokenizer.encode("<think>Hello world</think>The café").ids
    context = derender_pb2.DerenderContext(skip_special_tokens=True)
    for seed in range(5):
        session, deltas = Session(context, setup), []
        for chunk in random_chunks(ids, random.Random(seed)):
            deltas += session.feed(engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(token_ids=chunk)]))
        deltas += session.feed(engine_pb2.GenerateResponse(finished=True))
        assert "".join(d.reasoning for d in deltas) == "Hello world"
        assert "".join(d.content for d in deltas) == " The café"


def test_special_tool_marker_survives_skip_special_tokens():
    """Mistral's [TOOL_CALLS] is a special token: the mistral parser still sees it, other text never shows it."""
    tokenizer = metaspace()
    tokenizer.add_special_tokens(["[TOOL_CALLS]"])
    info = TokenizerInfo.from_hf(PreTrainedTokenizerFast(tokenizer_object=tokenizer))
    ids = tokenizer.encode('Hello[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]').ids
    context = derender_pb2.DerenderContext(skip_special_tokens=True, tools=[common_pb2.Tool(type="function")])
    deltas = []
    for tool_parser in ("mistral", "hermes"):
        session = Session(context, Defaults(info, Limits(), "none", tool_parser))
        deltas = session.feed(
            engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(token_ids=ids)], finished=True)
        )
        if tool_parser == "mistral":
            assert deltas[0].content == "Hello"
            assert [(c.name, c.arguments) for c in deltas[0].tool_calls] == [("f", '{"a": 1}')]
        else:  # not a hermes tag: the special token stays skipped
            assert "[TOOL_CALLS]" not in deltas[0].content and not deltas[0].tool_calls


def test_gemma4_special_tokens_survive_skip_special_tokens():
    """Gemma 4's channel, call and string-quote tags are special tokens: the gemma4 parsers still see them all."""
    tokenizer = metaspace()
    tokenizer.add_special_tokens(["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>'])
    info = TokenizerInfo.from_hf(PreTrainedTokenizerFast(tokenizer_object=tokenizer))
    ids = tokenizer.encode('<|channel>Hello world<channel|><|tool_call>call:f{a:<|"|>café<|"|>,n:1}<tool_call|>').ids
    context = derender_pb2.DerenderContext(skip_special_tokens=True, tools=[common_pb2.Tool(type="function")])
    session = Session(context, Defaults(info, Limits(), "gemma4", "gemma4"))
    deltas = session.feed(
        engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(token_ids=ids)], finished=True)
    )
    assert deltas[0].reasoning.strip() == "Hello world" and not deltas[0].content.strip()
    (call,) = deltas[0].tool_calls
    arguments = json.loads(call.arguments)  # Metaspace puts a space before the text after a special token
    assert call.name == "f" and arguments["a"].strip() == "café" and arguments["n"] == 1
