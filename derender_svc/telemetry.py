"""What derender's messages mean to telemetry: gen_ai.* on DerenderChat / DerenderStream / DerenderChunk spans.

Its answers are OpenAI-shaped (openai_shapes reads them, for the chat pipeline too); the stream and chunk
responses wrap one in a oneof. DerenderChatRequest names the model. DerenderStreamRequest carries the engine's
output: its tokens (passed through, not generated here), the prompt's size and usage.
"""

from __future__ import annotations

from scaleout.v1 import derender_pb2
from scaleout_common.telemetry import genai, openai_shapes

genai.on_response(derender_pb2.ChatCompletion)(openai_shapes.chat_answer)
genai.on_response(derender_pb2.ChatCompletionChunk)(openai_shapes.answer)
genai.on_response(derender_pb2.Completion)(openai_shapes.answer)


def _wrapped(msg: derender_pb2.DerenderStreamResponse | derender_pb2.DerenderChunkResponse, call: genai.GenAiCall):
    which = msg.WhichOneof("chunk")
    if which == "chat":
        openai_shapes.answer(msg.chat, call)
    elif which == "completion":
        openai_shapes.answer(msg.completion, call)


genai.on_response(derender_pb2.DerenderStreamResponse)(_wrapped)
genai.on_response(derender_pb2.DerenderChunkResponse)(_wrapped)


@genai.on_request(derender_pb2.DerenderChatRequest)
def _chat_request(msg: derender_pb2.DerenderChatRequest, call: genai.GenAiCall) -> None:
    if msg.context.model:
        call.set_attributes(genai.attributes(operation="chat", request_model=msg.context.model))


@genai.on_request(derender_pb2.DerenderStreamRequest)
def _stream_input(msg: derender_pb2.DerenderStreamRequest, call: genai.GenAiCall) -> None:
    if not msg.HasField("engine_output"):
        return
    output = msg.engine_output
    call.passed(sum(len(choice.token_ids) for choice in output.choices))
    if output.HasField("prompt"):
        call.prompt_tokens(output.prompt.num_tokens)
    if output.HasField("usage"):
        call.usage(output.usage.prompt_tokens, output.usage.completion_tokens)
