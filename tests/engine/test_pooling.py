"""The pooling engine (--runner pooling): Embed against transformers' own hidden states, its refusals, its flags."""

from __future__ import annotations

import asyncio
import copy
import threading
import types

import grpc
import pytest
import torch

from engine_svc.serving.pooling import settings
from scaleout.v1 import common_pb2, engine_pb2
from scaleout_common.errors import ServiceError
from tests.engine.conftest import engine_args, engine_stub, request

INPUTS = [[5, 9, 17, 33, 60, 61, 70], [3, 4], [100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112]]


def embed_request(inputs, **fields) -> engine_pb2.EmbedRequest:
    return engine_pb2.EmbedRequest(inputs=[common_pb2.TokenSequence(token_ids=ids) for ids in inputs], **fields)


def reference(model, ids: list[int], kind: str = "LAST", normalize: bool = True, dimensions: int | None = None):
    """transformers' own final hidden states (after the final norm) of one unpadded input, pooled."""
    with torch.no_grad():
        hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0].float()
    pooled = {"LAST": hidden[-1], "CLS": hidden[0], "MEAN": hidden.mean(0)}[kind][:dimensions]
    return torch.nn.functional.normalize(pooled, dim=-1) if normalize else pooled


def vectors(response: engine_pb2.EmbedResponse) -> list[torch.Tensor]:
    return [torch.tensor(list(item.values)) for item in response.embeddings]


def reason_of(error: grpc.RpcError) -> str:
    return ServiceError.from_rpc_error(error).reason


@pytest.mark.parametrize("kind", ["LAST", "MEAN", "CLS"])
async def test_a_batch_pools_each_input_as_transformers_computes_it_alone(tiny_model, kind):
    flags = ["--runner", "pooling", "--max-num-batched-tokens", "16"]  # the three inputs in two padded batches
    async with engine_stub(tiny_model, *flags, "--pooler-config", f'{{"pooling_type": "{kind}"}}') as (stub, _):
        response = await stub.Embed(embed_request(INPUTS, request_id="mine"))
        raw = await stub.Embed(embed_request(INPUTS[:1], use_activation=False))
    assert response.request_id == "mine" and response.prompt_tokens == sum(map(len, INPUTS))
    for got, ids in zip(vectors(response), INPUTS):
        torch.testing.assert_close(got, reference(tiny_model, ids, kind), rtol=0, atol=1e-5)
        assert abs(got.norm().item() - 1) < 1e-5
    torch.testing.assert_close(vectors(raw)[0], reference(tiny_model, INPUTS[0], kind, False), rtol=1e-5, atol=1e-5)


async def test_each_runner_refuses_the_other_ones_calls(tiny_model):
    async with engine_stub(tiny_model, "--runner", "pooling") as (stub, _):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GenerateUnary(request([1, 2], max_tokens=2))
        assert (caught.value.code(), reason_of(caught.value)) == (grpc.StatusCode.NOT_FOUND, "ROUTE_NOT_ENABLED")
        assert (await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())).runner == "pooling"
    async with engine_stub(tiny_model) as (stub, _):
        assert (await stub.GetModelInfo(engine_pb2.GetModelInfoRequest())).runner == "generate"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Embed(embed_request(INPUTS))
        assert (caught.value.code(), reason_of(caught.value)) == (grpc.StatusCode.NOT_FOUND, "ROUTE_NOT_ENABLED")
        assert "--runner pooling" in caught.value.details()


async def test_load_counts_each_input_waiting_and_being_pooled(tiny_model):
    """GetLoad (and so /get_load and the vllm: gauges) counts a pooler's inputs as sequences: the running request's
    while its batch computes, the queued ones' meanwhile, none once answered. The worker thread is held at the
    start of its first batch so that the counts are read at a known moment."""
    async with engine_stub(tiny_model, "--runner", "pooling") as (stub, service):
        pooler, started, release = service.loaded.pooler, threading.Event(), threading.Event()
        assert pooler is not None
        compute = pooler.vectors

        def held(*args):
            started.set()
            release.wait(30)
            return compute(*args)

        pooler.vectors = held
        first = asyncio.ensure_future(stub.Embed(embed_request(INPUTS[:2])))
        await asyncio.to_thread(started.wait, 30)
        second = asyncio.ensure_future(stub.Embed(embed_request(INPUTS)))
        while pooler.waiting < 3:
            await asyncio.sleep(0.01)
        load = await stub.GetLoad(engine_pb2.GetLoadRequest())
        release.set()
        await asyncio.gather(first, second)
        after = await stub.GetLoad(engine_pb2.GetLoadRequest())
    assert (load.running, load.waiting) == (2, 3)
    assert (after.running, after.waiting) == (0, 0)


BAD = [
    (embed_request([]), grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_PROMPT"),
    (embed_request([[1, 2], []]), grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_PROMPT"),
    (embed_request([[1, 999]]), grpc.StatusCode.INVALID_ARGUMENT, "TOKEN_ID_OUT_OF_VOCAB"),
    (embed_request([[1] * 513]), grpc.StatusCode.OUT_OF_RANGE, "PROMPT_TOO_LONG"),
    (embed_request([[1, 2]], dimensions=8), grpc.StatusCode.INVALID_ARGUMENT, "UNSUPPORTED_FIELD"),
    (embed_request([[1, 2]], tokenizer_fingerprint="sha256:theirs"), grpc.StatusCode.FAILED_PRECONDITION,
     "TOKENIZER_MISMATCH"),
]  # fmt: skip


async def test_bad_requests_are_refused_with_their_reasons(tiny_model):
    async with engine_stub(tiny_model, "--runner", "pooling", fingerprint="sha256:mine") as (stub, _):
        for message, code, reason in BAD:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Embed(message)
            assert (caught.value.code(), reason_of(caught.value)) == (code, reason), message
            if message.HasField("dimensions"):  # vLLM's words
                assert "Model 'test' does not support Matryoshka embeddings" in caught.value.details()


async def test_a_matryoshka_model_cuts_its_vectors_then_normalizes(tiny_model):
    model = copy.deepcopy(tiny_model)
    model.config.matryoshka_dimensions = [16, 32]
    async with engine_stub(model, "--runner", "pooling", "--pooler-config", '{"dimensions": 32}') as (stub, _):
        cut = await stub.Embed(embed_request(INPUTS[:1], dimensions=16))
        default = await stub.Embed(embed_request(INPUTS[:1]))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Embed(embed_request(INPUTS[:1], dimensions=20))
    torch.testing.assert_close(vectors(cut)[0], reference(model, INPUTS[0], dimensions=16), rtol=0, atol=1e-5)
    assert len(vectors(default)[0]) == 32
    assert reason_of(caught.value) == "INVALID_REQUEST" and "[16, 32], got 20" in caught.value.details()


CONFIG = types.SimpleNamespace(hidden_size=64)
REFUSED_FLAGS = [
    (["--convert", "classify"], "--convert classify"),
    (["--runner", "generate", "--convert", "embed"], "--convert embed needs --runner pooling"),
    (["--pooler-config", '{"pooling_type": "LAST"}'], "--pooler-config needs --runner pooling"),
    (["--runner", "pooling", "--pooler-config", '{"normalize": true}'], "use `use_activation` instead"),
    (["--runner", "pooling", "--pooler-config", '{"pooling_type": "ALL"}'], "pooling_type ALL: not supported"),
    (["--runner", "pooling", "--pooler-config", '{"task": "classify"}'], "--pooler-config task"),
    (["--runner", "pooling", "--pooler-config", '{"max_embed_len": 9}'], "max_embed_len: not supported"),
    (["--runner", "pooling", "--pooler-config", '{"enable_chunked_processing": true}'], "enable_chunked_processing"),
    (["--runner", "pooling", "--pooler-config", '{"dimensions": 8}'], "does not support Matryoshka"),
    (["--runner", "pooling", "--pooler-config", "[1]"], "must be a JSON object"),
]


@pytest.mark.parametrize(("flags", "named"), REFUSED_FLAGS)
def test_pooling_flags_vllm_takes_but_this_engine_cannot_honour_are_refused_by_name(flags, named):
    with pytest.raises(ValueError) as caught:
        settings(engine_args(*flags), CONFIG)
    assert named in str(caught.value)


def test_pooling_flags_resolve_as_vllm_resolves_them():
    assert settings(engine_args(), CONFIG) is None  # auto: generate
    assert settings(engine_args("--convert", "embed"), CONFIG).seq_pooling_type == "LAST"  # auto: pooling
    given = '{"seq_pooling_type": "MEAN", "use_activation": false, "enable_flash_late_interaction": true}'
    resolved = settings(engine_args("--runner", "pooling", "--pooler-config", given), CONFIG)
    assert (resolved.seq_pooling_type, resolved.use_activation, resolved.dimensions) == ("MEAN", False, None)
