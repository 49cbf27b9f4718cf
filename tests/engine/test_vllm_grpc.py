"""The engine's vLLM gRPC face (engine_svc/serving/vllm_grpc/): the mapping table, and each RPC on a real engine
(the tiny model over the default model's tokenizer) against the same engine's typed face."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import zipfile

import grpc
import pytest
from smg_grpc_proto.generated import common_pb2 as smg_common
from smg_grpc_proto.generated import vllm_engine_pb2 as vllm
from smg_grpc_proto.generated import vllm_engine_pb2_grpc

from engine_svc.serving.vllm_grpc import mapping
from scaleout.v1 import engine_pb2_grpc
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason
from tests.engine.conftest import generate, request

PROMPT = [1, 504, 3458, 282, 4649, 314, 30, 2]


def theirs(stream: bool = True, **sampling) -> vllm.GenerateRequest:
    return vllm.GenerateRequest(
        request_id="r", tokenized=vllm.TokenizedInput(input_ids=PROMPT), stream=stream,
        sampling_params=vllm.SamplingParams(**sampling),
    )  # fmt: skip


def test_the_table_maps_sampling_and_refuses_what_the_engine_does_not_run():
    ours = mapping.generate_request(
        theirs(temperature=0, top_k=0, top_p=0, max_tokens=5, n=2, stop=["x"], skip_special_tokens=True,
               logprobs=2, seed=3, json_schema='{"type": "object"}', truncate_prompt_tokens=3),
        max_model_len=512,
    )  # fmt: skip
    params = ours.sampling_params
    assert list(ours.token_ids) == PROMPT[-3:] and ours.n == 2
    assert params.HasField("temperature") and params.temperature == 0 and not params.HasField("top_k")
    assert not params.HasField("top_p") and params.max_tokens == 5 and list(params.stop) == ["x"]
    assert not params.stop_keep_special_tokens and params.logprobs == 2 and params.seed == 3
    assert params.structured_outputs.json_schema == '{"type": "object"}'
    choice = mapping.generate_request(theirs(choice=vllm.ChoiceConstraint(choices=["a", "b"])), 512)
    assert list(choice.sampling_params.structured_outputs.choice.values) == ["a", "b"]
    for refused in (
        vllm.GenerateRequest(text="hi"),
        vllm.GenerateRequest(kv_transfer_params_json="{}"),
        vllm.GenerateRequest(data_parallel_rank=1),
    ):
        with pytest.raises(ServiceError) as error:
            mapping.generate_request(refused, 512)
        assert error.value.reason == Reason.UNSUPPORTED_FIELD


async def test_streamed_chunks_then_one_complete_per_choice_with_cumulative_counts(worded_engine, tokenizer):
    face = vllm_engine_pb2_grpc.VllmEngineStub(worded_engine)
    _, free = await generate(
        engine_pb2_grpc.EngineServiceStub(worded_engine), request(PROMPT, temperature=0, max_tokens=12, ignore_eos=True)
    )
    stop = tokenizer.decode(free[0][6:7]).strip()[:3]
    messages = [
        m
        async for m in face.Generate(
            theirs(
                temperature=0, max_tokens=12, ignore_eos=True, n=2, stop=[stop], skip_special_tokens=True, logprobs=1
            )
        )
    ]
    completes = [m.complete for m in messages if m.HasField("complete")]
    assert sorted(c.index for c in completes) == [0, 1]
    for index in (0, 1):
        chunks = [m.chunk for m in messages if m.HasField("chunk") and m.chunk.index == index]
        tokens = [t for c in chunks for t in c.token_ids]
        assert tokens == free[0][: len(tokens)] and len(tokens) <= 7
        counts = list(itertools.accumulate(len(c.token_ids) for c in chunks))  # a lagging reader gets tokens batched
        assert [c.completion_tokens for c in chunks] == counts and counts[-1] == len(tokens)
        assert all(c.prompt_tokens == len(PROMPT) for c in chunks)
        assert [len(c.output_logprobs.top_logprobs[0].values) for c in chunks] == [1] * len(chunks)
        done = next(c for c in completes if c.index == index)
        assert done.finish_reason == "stop" and done.matched_stop_str == stop
        assert done.completion_tokens == len(tokens) and list(done.output_ids) == tokens[-1:]


async def test_unary_completes_carry_every_token_and_prompt_logprobs(worded_engine):
    face = vllm_engine_pb2_grpc.VllmEngineStub(worded_engine)
    messages = [
        m async for m in face.Generate(theirs(False, temperature=0, max_tokens=4, ignore_eos=True, prompt_logprobs=1))
    ]
    assert [m.WhichOneof("response") for m in messages] == ["complete"]
    done = messages[0].complete
    assert done.finish_reason == "length" and len(done.output_ids) == 4 == done.completion_tokens
    assert list(done.input_logprobs.token_ids) == PROMPT and not done.input_logprobs.token_logprobs[0].HasField("value")
    assert all(lp.HasField("value") for lp in done.input_logprobs.token_logprobs[1:])


async def test_bad_input_ends_the_call_with_its_status(worded_engine):
    face = vllm_engine_pb2_grpc.VllmEngineStub(worded_engine)
    connector = theirs()
    connector.kv_transfer_params_json = '{"do_remote_prefill": true}'
    for bad in (connector, theirs(temperature=-1)):
        with pytest.raises(grpc.aio.AioRpcError) as error:
            [m async for m in face.Generate(bad)]
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_model_server_loads_tokenizer_health_and_flush(worded_engine):
    face = vllm_engine_pb2_grpc.VllmEngineStub(worded_engine)
    assert (await face.HealthCheck(vllm.HealthCheckRequest())).healthy
    info = await face.GetModelInfo(vllm.GetModelInfoRequest())
    assert info.model_path.endswith("SmolLM2-135M-Instruct") and info.served_model_name == "worded"
    assert info.model_type == "llama" and list(info.architectures) == ["LlamaForCausalLM"]
    assert info.is_generation and info.max_context_length > 0 and info.vocab_size == 49152
    assert json.loads(info.default_sampling_params_json or "{}") == {}
    server = await face.GetServerInfo(vllm.GetServerInfoRequest())
    assert server.server_type == "vllm-grpc" and server.block_size > 0 and server.max_num_seqs > 0
    loads = await face.GetLoads(vllm.GetLoadsRequest())
    assert loads.dp_rank_count == 1 and loads.loads[0].max_total_num_tokens > 0
    chunks = [c async for c in face.GetTokenizer(smg_common.GetTokenizerRequest())]
    data = b"".join(c.data for c in chunks)
    assert chunks[-1].sha256 == hashlib.sha256(data).hexdigest() and not any(c.sha256 for c in chunks[:-1])
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} <= set(names)
    assert (await face.FlushCache(smg_common.FlushCacheRequest())).success
    with pytest.raises(grpc.aio.AioRpcError) as error:
        [b async for b in face.SubscribeKvEvents(smg_common.SubscribeKvEventsRequest())]
    assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
