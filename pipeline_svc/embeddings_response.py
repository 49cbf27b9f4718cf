"""The engine's EmbedResponse as OpenAI's embeddings JSON (with vLLM's `id` and `created` beside it).

`data[i].embedding` is a list of numbers, or with `encoding_format: "base64"` the vector's float32 bytes in base64
(little-endian unless vLLM's `endianness` asks otherwise; another type with vLLM's `embed_dtype`: embed_dtypes.py),
which OpenAI's SDK decodes with numpy. `usage` is OpenAI's: `prompt_tokens` and `total_tokens`, both the inputs'
tokens.
"""

from __future__ import annotations

import base64
import time

from pipeline_svc.embed_dtypes import vector_bytes
from scaleout.v1 import engine_pb2


def encoded(values, encoding: str, byte_order: str, embed_dtype: str = "float32") -> list[float] | str:
    """One vector as a list of numbers, or with "base64" its `embed_dtype` bytes in `byte_order` ("<" or ">")."""
    if encoding == "base64":
        return base64.b64encode(vector_bytes(values, embed_dtype, byte_order)).decode("ascii")
    return list(values)


def embeddings(
    response: engine_pb2.EmbedResponse, model: str, encoding: str, byte_order: str, embed_dtype: str = "float32"
) -> dict:
    return {
        "id": f"embd-{response.request_id}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": [
            {"index": i, "object": "embedding", "embedding": encoded(item.values, encoding, byte_order, embed_dtype)}
            for i, item in enumerate(response.embeddings)
        ],
        "usage": {"prompt_tokens": response.prompt_tokens, "total_tokens": response.prompt_tokens},
    }


def usage_info(tokens: int) -> dict:
    """vLLM's UsageInfo whole, as its /score and /pooling answers print it (the inputs' tokens, nothing generated)."""
    return {
        "prompt_tokens": tokens,
        "total_tokens": tokens,
        "completion_tokens": 0,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }
