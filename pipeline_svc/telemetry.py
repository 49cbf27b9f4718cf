"""What the one-hop routes' messages mean to telemetry: gen_ai.* on ChatService and OpenAIService spans.

OpenAIService's wire messages are opaque HttpBody: it hands the typed request and answers it builds to
`call_summary.observe_request` / `observe_response`, which read them with the readers registered here.

Its request is OpenAI's chat request and its answers OpenAI's chat completion and chunks, the contract's
RenderChatRequest, ChatCompletion and ChatCompletionChunk: the shapes render and derender serve, read by the
same openai_shapes readers. Registered here again because the pipeline imports no service package (served in
one process with render or derender, the second registration of the same reader is a no-op).
"""

from __future__ import annotations

from scaleout.v1 import derender_pb2, render_pb2
from scaleout_common.telemetry import genai, openai_shapes

genai.on_request(render_pb2.RenderChatRequest)(openai_shapes.chat_request)
genai.on_response(derender_pb2.ChatCompletion)(openai_shapes.chat_answer)
genai.on_response(derender_pb2.ChatCompletionChunk)(openai_shapes.answer)
genai.on_response(derender_pb2.Completion)(openai_shapes.answer)


@genai.on_request(render_pb2.RenderCompletionRequest)
def _completion_request(msg: render_pb2.RenderCompletionRequest, call: genai.GenAiCall) -> None:
    """The knobs a /v1/completions client asked for (gen_ai.request.*)."""

    def given(name: str):
        return getattr(msg, name) if msg.HasField(name) else None

    knobs = {knob: given(knob) for knob in genai.SAMPLING_KNOBS}
    call.set_attributes(
        genai.attributes(operation="text_completion", request_model=msg.model or None, choice_count=given("n"), **knobs)
    )
