"""Where the engine builds a request's timings (engine.proto RequestTimings, what the pipeline's vLLM per-request
metrics read): on every typed stream message with tokens, once on GenerateUnary's answer, never for the vLLM
face (its messages have no such field)."""

from __future__ import annotations

from smg_grpc_proto.generated import vllm_engine_pb2 as vllm
from smg_grpc_proto.generated import vllm_engine_pb2_grpc

from engine_svc.serving import streaming
from tests.engine.conftest import assert_timed, engine_stub, generate, request

PROMPT = [1, 5, 9, 13, 17, 21]


async def test_timings_are_built_where_they_are_read(monkeypatch):
    built = []
    real = streaming.timings_pb
    monkeypatch.setattr(streaming, "timings_pb", lambda state: built.append(state) or real(state))
    message = request(PROMPT, temperature=0, max_tokens=6, ignore_eos=True, n=2)
    async with engine_stub(None) as (stub, _service):
        messages, _ = await generate(stub, message)
        streamed, built[:] = len(built), []
        unary = await stub.GenerateUnary(message)
        answered, built[:] = len(built), []
        face = vllm_engine_pb2_grpc.VllmEngineStub(stub.channel)
        theirs = vllm.GenerateRequest(
            request_id="v", tokenized=vllm.TokenizedInput(input_ids=PROMPT), stream=True,
            sampling_params=vllm.SamplingParams(temperature=0, max_tokens=6, ignore_eos=True),
        )  # fmt: skip
        chunks = [m async for m in face.Generate(theirs)]
    assert streamed == len(messages) > 1  # each message's, the pipeline reads the last one it forwards
    assert_timed(messages)
    # the unary answer's: the whole request's, built once from its final stamps
    assert answered == 1 and unary.timings.prefill_seconds > 0 and unary.timings.decode_seconds > 0
    assert unary.timings.queue_seconds >= 0 and unary.finished
    assert built == [] and sum(len(c.chunk.token_ids) for c in chunks if c.HasField("chunk")) == 6
    assert chunks[-1].complete.completion_tokens == 6
