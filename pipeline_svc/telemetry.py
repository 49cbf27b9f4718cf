"""What the one-hop chat's messages mean to telemetry: gen_ai.* on ChatService spans.

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
