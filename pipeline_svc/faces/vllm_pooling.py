"""vLLM 0.33's `/pooling` JSON over an embedding model -> the embeddings request, and its answer.

The policy (its PoolingCompletionRequest on a model whose pooling task is `embed`): the body is an embeddings body
(pipeline_svc/embeddings_request.py takes every field alike: `input`, `encoding_format` float or base64,
`add_special_tokens`, `use_activation`, ...) with `task`: "embed" (or absent) is served, another task is refused
naming `task` in vLLM's words (`plugin`: no IOProcessor plugin; another: the model supports `embed` alone); `dimensions` is refused with vLLM's words (its
/pooling does not take it). The answer is vLLM's PoolingResponse: id `pooling-<request_id>`, `data[i].data` the
vector (a list of numbers, or base64 float32 bytes), usage as vLLM's UsageInfo whole.
"""

from __future__ import annotations

import time

from pipeline_svc.embeddings_request import EmbeddingsRequest, embeddings_fields
from pipeline_svc.embeddings_response import encoded, usage_info
from scaleout.v1 import engine_pb2
from scaleout_common.errors import QUOTE_CHARS, clip
from scaleout_common.json_body import load_object
from scaleout_common.reasons import Reason, fail

TASK = "embed"


def pooling_request(body: bytes) -> EmbeddingsRequest:
    data = load_object(body)
    task = data.pop("task", None)
    if task == "plugin":  # vLLM's words: an IOProcessor plugin's task (none is installed here)
        raise fail(Reason.UNSUPPORTED_FIELD, "No IOProcessor plugin installed.", "task")
    if task is not None and task != TASK:
        named = clip(repr(task), QUOTE_CHARS)
        raise fail(Reason.UNSUPPORTED_FIELD, f"Unsupported task: {named} Supported tasks: ({TASK!r},)", "task")
    if data.get("dimensions") is not None:
        raise fail(Reason.UNSUPPORTED_FIELD, "dimensions is currently not supported", "dimensions")  # vLLM's words
    return embeddings_fields(data)


def pooling_body(response: engine_pb2.EmbedResponse, model: str, request: EmbeddingsRequest) -> dict:
    return {
        "id": f"pooling-{response.request_id}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": [
            {
                "index": i,
                "object": "pooling",
                "data": encoded(item.values, request.encoding, request.byte_order, request.embed_dtype),
            }
            for i, item in enumerate(response.embeddings)
        ],
        "usage": usage_info(response.prompt_tokens),
    }
