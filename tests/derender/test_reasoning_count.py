"""Reasoning tokens through the real derender server: `usage.completion_tokens_details.reasoning_tokens` (unary,
stateful stream, stateless twin, completions summed) and the CheckReasoning RPC (vLLM's is_reasoning_end,
extract_content_ids, count_reasoning_tokens over token ids)."""

from __future__ import annotations

import grpc
import pytest

from scaleout.v1 import derender_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason
from tests.derender.calls import engine_messages, stream, twin

TEXT = "<think>Two plus two.</think>It is 4."


def _ids(hf_tokenizer, text: str) -> list[int]:
    return hf_tokenizer.encode(text, add_special_tokens=False)


def _context(**kwargs) -> derender_pb2.DerenderContext:
    return derender_pb2.DerenderContext(id="chatcmpl-count", include_usage=True, **kwargs)


@pytest.mark.parametrize("parser,started,text,inside", [
    ("think", False, TEXT, "Two plus two."),
    ("think", False, "<think>cut off inside", "cut off inside"),
    ("think", True, "opened by the prompt</think>x", "opened by the prompt"),
    ("qwen3", False, '<think>call it<tool_call>{"name": "f"}</tool_call>', "call it"),
    ("think", False, "no reasoning at all", ""),
])  # fmt: skip
async def test_usage_counts_reasoning_tokens(stub, hf_tokenizer, parser, started, text, inside):
    ids, expected = _ids(hf_tokenizer, text), len(_ids(hf_tokenizer, inside)) if inside else 0
    context = _context(reasoning_parser=parser, reasoning_started=started, continuous_usage_stats=True)
    messages = engine_messages([[i] for i in ids])
    unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages))
    assert unary.usage.completion_tokens_details.reasoning_tokens == expected
    for responses in (await stream(stub, context, messages), await twin(stub, context, messages)):
        counts = [r.chat.usage.completion_tokens_details.reasoning_tokens for r in responses]
        assert counts[-1] == expected and counts == sorted(counts)  # running counts only grow


async def test_no_reasoning_parser_no_details(stub, hf_tokenizer):
    messages = engine_messages([_ids(hf_tokenizer, TEXT)])
    unary = await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=_context(), results=messages))
    assert unary.usage.completion_tokens == len(_ids(hf_tokenizer, TEXT))
    assert not unary.usage.HasField("completion_tokens_details")


async def test_completions_sum_reasoning_tokens(stub, hf_tokenizer):
    prompts = [
        derender_pb2.CompletionResult(
            context=derender_pb2.DerenderContext(id="cmpl-count", prompt_index=p, reasoning_parser="think"),
            results=engine_messages([_ids(hf_tokenizer, TEXT)]),
        )
        for p in range(2)
    ]
    completion = await stub.DerenderCompletion(derender_pb2.DerenderCompletionRequest(prompts=prompts))
    assert completion.usage.completion_tokens_details.reasoning_tokens == 2 * len(_ids(hf_tokenizer, "Two plus two."))


async def test_check_reasoning(stub, hf_tokenizer):
    ids = _ids(hf_tokenizer, TEXT)
    answer = await stub.CheckReasoning(derender_pb2.CheckReasoningRequest(reasoning_parser="think", token_ids=ids))
    assert answer.is_reasoning_end and list(answer.content_token_ids) == _ids(hf_tokenizer, "It is 4.")
    assert answer.reasoning_tokens == len(_ids(hf_tokenizer, "Two plus two."))
    assert list(answer.tokens.start[0].token_ids) == _ids(hf_tokenizer, "<think>")
    open_ids = _ids(hf_tokenizer, "<think>Two plus")
    going = await stub.CheckReasoning(derender_pb2.CheckReasoningRequest(reasoning_parser="think", token_ids=open_ids))
    assert not going.is_reasoning_end and not going.content_token_ids and going.reasoning_tokens == 2
    started = _ids(hf_tokenizer, "abc</think>x")
    ended = await stub.CheckReasoning(
        derender_pb2.CheckReasoningRequest(reasoning_parser="think", reasoning_started=True, token_ids=started)
    )
    assert ended.is_reasoning_end and list(ended.content_token_ids) == _ids(hf_tokenizer, "x")
    plain = await stub.CheckReasoning(
        derender_pb2.CheckReasoningRequest(reasoning_parser="think", token_ids=_ids(hf_tokenizer, "no tags"))
    )
    assert not plain.is_reasoning_end and not plain.content_token_ids  # vLLM: no tag, not over
    none = await stub.CheckReasoning(derender_pb2.CheckReasoningRequest(reasoning_parser="none", token_ids=ids))
    assert none.is_reasoning_end and list(none.content_token_ids) == ids and none.reasoning_tokens == 0


@pytest.mark.parametrize("request_fields,reason", [
    ({"reasoning_parser": "nope"}, Reason.UNKNOWN_PARSER),
    ({"reasoning_parser": "think", "token_ids": [10**8]}, Reason.TOKEN_ID_OUT_OF_VOCAB),
    ({"reasoning_parser": "think", "tokenizer_fingerprint": "other"}, Reason.TOKENIZER_MISMATCH),
])  # fmt: skip
async def test_check_reasoning_refuses_bad_input(stub, request_fields, reason):
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await stub.CheckReasoning(derender_pb2.CheckReasoningRequest(**request_fields))
    assert error.value.code() == reason.code
    assert ServiceError.from_rpc_error(error.value).reason == reason


def test_openai_usage_prints_the_details():
    from pipeline_svc.openai_response import usage
    from scaleout.v1 import common_pb2

    plain = common_pb2.Usage(prompt_tokens=1, completion_tokens=5, total_tokens=6)
    assert "completion_tokens_details" not in usage(plain)
    plain.completion_tokens_details.reasoning_tokens = 3
    assert usage(plain)["completion_tokens_details"] == {"reasoning_tokens": 3}
