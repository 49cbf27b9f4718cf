"""What render's messages mean to telemetry: gen_ai.* on RenderChat spans.

RenderChatRequest is OpenAI's chat request (openai_shapes reads it, for the chat pipeline too). RenderChatResponse
is what render resolved: the span shows what the engine will actually be asked for (server defaults filled in)
and the completion id derender will answer under.
"""

from __future__ import annotations

from scaleout.v1 import render_pb2
from scaleout_common.telemetry import genai, openai_shapes

genai.on_request(render_pb2.RenderChatRequest)(openai_shapes.chat_request)


@genai.on_response(render_pb2.RenderChatResponse)
def _rendered(msg: render_pb2.RenderChatResponse, call: genai.GenAiCall) -> None:
    request = msg.generate_request
    call.set_attributes(
        genai.attributes(
            operation="chat",
            input_tokens=len(request.token_ids),
            choice_count=request.n if request.HasField("n") else 1,
            request_model=request.model or None,
            response_id=msg.derender_context.id or None,
        )
        | genai.sampling_attributes(request.sampling_params)
    )
