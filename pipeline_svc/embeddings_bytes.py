"""vLLM's binary pooling answers: `encoding_format` "bytes" and "bytes_only" on `/v1/embeddings` and `/pooling`.

The body (application/octet-stream) is every vector's bytes, in input order, in the request's `embed_dtype` and
byte order (embed_dtypes.py). With "bytes" the answer's `metadata` header is vLLM's JSON: `id`, `created`,
`model`, `usage` and per vector its `index`, `embed_dtype`, `endianness`, `start` / `end` (its bytes in the body)
and `shape`; "bytes_only" sends no header (the client knows the layout). The header's endianness names the
order used ("little" or "big", also for a request that said "native").
"""

from __future__ import annotations

import json
import time

from google.api import httpbody_pb2

from pipeline_svc.embed_dtypes import vector_bytes
from pipeline_svc.embeddings_request import EmbeddingsRequest
from scaleout.v1 import engine_pb2

BYTES_ENCODINGS = ("bytes", "bytes_only")
OCTETS = "application/octet-stream"


async def bytes_answer(
    response: engine_pb2.EmbedResponse, model: str, request: EmbeddingsRequest, id_prefix: str, context
) -> httpbody_pb2.HttpBody:
    blobs = [vector_bytes(item.values, request.embed_dtype, request.byte_order) for item in response.embeddings]
    if request.encoding == "bytes":
        await context.send_initial_metadata((("metadata", metadata(response, model, request, id_prefix, blobs)),))
    return httpbody_pb2.HttpBody(content_type=OCTETS, data=b"".join(blobs))


def metadata(response, model: str, request: EmbeddingsRequest, id_prefix: str, blobs: list[bytes]) -> str:
    endianness = "little" if request.byte_order == "<" else "big"
    items, offset = [], 0
    for index, (item, blob) in enumerate(zip(response.embeddings, blobs, strict=True)):
        shape = [len(item.values)]
        items.append(
            {"index": index, "embed_dtype": request.embed_dtype, "endianness": endianness, "start": offset,
             "end": offset + len(blob), "shape": shape}
        )  # fmt: skip
        offset += len(blob)
    usage = {"prompt_tokens": response.prompt_tokens, "total_tokens": response.prompt_tokens}
    head = {"id": f"{id_prefix}-{response.request_id}", "created": int(time.time()), "model": model}
    return json.dumps(head | {"data": items, "usage": usage})
