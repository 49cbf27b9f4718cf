"""What the engine's messages mean to telemetry: gen_ai.* on Generate / GenerateUnary / Embed spans, the LLM metrics.

GenerateRequest: the knobs the engine was sent. GenerateResponse: the tokens each choice generated (the call's
summary counts and times them), finish reasons (named by scaleout_common.finish_reasons), the prompt's size,
usage and the request id. Time in queue and in prefill, and the first token's stamp, the servicer reports with
`report_engine_timing`.
"""

from __future__ import annotations

from scaleout.v1 import engine_pb2
from scaleout_common import finish_reasons
from scaleout_common.telemetry import genai


@genai.on_request(engine_pb2.GenerateRequest)
def _request(msg: engine_pb2.GenerateRequest, call: genai.GenAiCall) -> None:
    call.set_attributes(
        genai.attributes(
            operation="generate",
            input_tokens=len(msg.token_ids),
            choice_count=msg.n if msg.HasField("n") else 1,
            request_model=msg.model or None,
        )
        | genai.sampling_attributes(msg.sampling_params)
    )


@genai.on_response(engine_pb2.GenerateResponse)
def _output(msg: engine_pb2.GenerateResponse, call: genai.GenAiCall) -> None:
    new_tokens = []
    for choice in msg.choices:  # one pass: iterating a repeated message field costs ~1 us per pass
        new_tokens.append(len(choice.token_ids))
        if choice.finish_reason:
            call.finished(choice.index, finish_reasons.openai_name(choice.finish_reason))
    call.generated(new_tokens)
    if msg.HasField("prompt"):
        call.prompt_tokens(msg.prompt.num_tokens)
    if msg.HasField("usage"):
        call.usage(msg.usage.prompt_tokens, msg.usage.completion_tokens)
    call.response_id(msg.request_id)


@genai.on_request(engine_pb2.EmbedRequest)
def _embed_request(msg: engine_pb2.EmbedRequest, call: genai.GenAiCall) -> None:
    call.set_attributes(genai.attributes(operation="embeddings", request_model=msg.model or None))


@genai.on_response(engine_pb2.EmbedResponse)
def _embed_output(msg: engine_pb2.EmbedResponse, call: genai.GenAiCall) -> None:
    """An embed call is counted as vLLM counts pooling requests: each input a request finished "stop", its tokens
    prompt tokens, none generated (no first token: no TTFT)."""
    call.generated([])
    for index in range(len(msg.embeddings)):
        call.finished(index, "stop")
    call.usage(msg.prompt_tokens, 0)
    call.response_id(msg.request_id)
