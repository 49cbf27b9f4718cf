"""A unary JSON answer sent as several HttpBody messages, each at most PIECE_BYTES: Envoy's transcoder writes a
stream of HttpBody as one response body (the first message's content type), so an answer larger than one gRPC
message (--max-message-mb; vLLM's prompt_logprobs over the whole vocabulary: ~85 bytes an alternative, 68 MB for
18 prompt tokens of SmolLM2's 49,152) reaches the client whole instead of failing RESOURCE_EXHAUSTED (a 429)."""

from __future__ import annotations

from collections.abc import Iterator

from google.api import httpbody_pb2

PIECE_BYTES = 4 << 20  # well under any --max-message-mb; one piece for nearly every answer


def pieces(answer: httpbody_pb2.HttpBody) -> Iterator[httpbody_pb2.HttpBody]:
    if len(answer.data) <= PIECE_BYTES:
        yield answer
        return
    for at in range(0, len(answer.data), PIECE_BYTES):
        yield httpbody_pb2.HttpBody(content_type=answer.content_type, data=answer.data[at : at + PIECE_BYTES])
