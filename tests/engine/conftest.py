"""Engine test fixtures: a tiny random-weight Llama served by the real EngineService on loopback."""

from __future__ import annotations

import contextlib
import functools

import grpc
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from engine_svc.__main__ import make_parser
from engine_svc.scheduling.stop_strings import StopStrings
from engine_svc.serving.loader import build_engine
from engine_svc.serving.service import EngineService
from scaleout.v1 import common_pb2, engine_pb2, engine_pb2_grpc
from scaleout_common.models import load_tokenizer, resolve_model
from tests.serving import NO_DRAIN_DELAY, serving

QUESTIONS = [  # chat prompts for output checks on the default model
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain gravity to a child.",
    "List three prime numbers.",
    "Who wrote Hamlet?",
    "Translate 'good morning' into Spanish.",
    "What is 12 times 12?",
    "Give me a tip for learning Python.",
    "Why is the sky blue?",
    "Name a famous painting.",
    "Describe a cat in one sentence.",
    "What does a CPU do?",
]

TINY_VOCAB = 256
TINY_EOS = 2


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    """A tiny random Llama whose matrices are 5x the default init: at the default (std 0.02) its greedy tokens
    depend on the current token alone, so attention, masks and caches would go untested by output checks."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=TINY_VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=TINY_EOS,
        bos_token_id=1,
        pad_token_id=0,
        tie_word_embeddings=True,
        architectures=["LlamaForCausalLM"],
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() == 2:
                weight.mul_(5)
    return model


def build_tiny(args):
    """A tiny-model engine from flags (module level, so an engine core process can build it from a pickle)."""
    return build_engine(tiny_llama(), args, model_name="test")


def engine_args(*flags: str):
    return make_parser().parse_args(["--port", "0", "--metrics-port", "-1", *flags])


@contextlib.asynccontextmanager
async def engine_stub(model, *flags: str, fingerprint: str = ""):
    """A real engine server for `model` (flags as on the command line; it stops without a drain delay, as
    tests.serving's) and a stub talking to it. With model=None the tiny model is built by `build_tiny` (what an
    engine core process needs)."""
    parser = make_parser()
    args = parser.parse_args([*NO_DRAIN_DELAY, *flags])
    build = (
        functools.partial(build_tiny, args)
        if model is None
        else (lambda: build_engine(model, args, model_name="test", tokenizer_fingerprint=fingerprint))
    )
    service = EngineService(args, build=build)
    parser.set_defaults(**vars(args))
    async with serving(service, parser) as target, grpc.aio.insecure_channel(target) as channel:
        stub = engine_pb2_grpc.EngineServiceStub(channel)
        stub.channel = channel
        yield stub, service


def request(
    token_ids, request_id: str = "", n: int | None = None, stream_interval: int | None = None, **sampling
) -> engine_pb2.GenerateRequest:
    message = engine_pb2.GenerateRequest(
        request_id=request_id, token_ids=token_ids, sampling_params=common_pb2.SamplingParams(**sampling)
    )
    if n is not None:
        message.n = n
    if stream_interval is not None:
        message.stream_interval = stream_interval
    return message


async def generate(stub, message) -> tuple[list[engine_pb2.GenerateResponse], dict[int, list[int]]]:
    """All messages of one stream, and each choice's tokens."""
    messages = [m async for m in stub.Generate(message)]
    tokens: dict[int, list[int]] = {}
    for m in messages:
        for c in m.choices:
            tokens.setdefault(c.index, []).extend(c.token_ids)
    return messages, tokens


def assert_timed(messages: list[engine_pb2.GenerateResponse]) -> None:
    """Every message with tokens has the request's timings so far, the prefill and queue fixed once known, the
    decode growing; the last message's cover a decode (more than one token)."""
    timed = [m.timings for m in messages if m.choices]
    assert len(timed) == len(messages) and all(m.HasField("timings") for m in messages)
    assert len({(t.queue_seconds, t.prefill_seconds) for t in timed}) == 1
    assert timed[0].queue_seconds >= 0 and timed[0].prefill_seconds > 0 and timed[-1].decode_seconds > 0
    decodes = [t.decode_seconds for t in timed]
    assert decodes == sorted(decodes)


@pytest.fixture(scope="session")
def tiny_model():
    return tiny_llama()


def worded_model(vocab_size: int) -> LlamaForCausalLM:
    """The tiny Llama (its weights scaled as tiny_llama's, so greedy outputs vary) with a real vocabulary."""
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**tiny_llama().config.to_dict() | {"vocab_size": vocab_size})).eval()
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() == 2:
                weight.mul_(5)
    return model


@pytest.fixture(scope="session")
def tokenizer():
    return load_tokenizer(resolve_model(None))


@pytest.fixture(scope="session")
async def worded_engine(tokenizer):
    """A channel to an engine whose tiny model speaks the default model's tokenizer (its outputs decode to text,
    so stop strings match; its folder is the default model's, for GetModelInfo and GetTokenizer)."""
    args, model = engine_args(), worded_model(len(tokenizer))

    def build():
        folder = str(resolve_model(None))
        return build_engine(model, args, model_name="worded", stop_strings=StopStrings.of(tokenizer), model_path=folder)

    service = EngineService(args, build=build)
    async with serving(service, make_parser()) as target, grpc.aio.insecure_channel(target) as channel:
        yield channel
