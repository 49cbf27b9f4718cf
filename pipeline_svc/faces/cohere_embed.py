"""Cohere's `POST /v2/embed` as vLLM 0.33 serves it over an embedding model -> one embedding call, and its answer.

The policy (vLLM's CohereEmbedRequest; the hops: pipeline_svc/embed_call.py):
- `texts`: the strings to embed (required, non-empty: vLLM's words); `images` and `inputs` (content parts, which
  vLLM renders through the chat template) are refused naming them: embed text in `texts`;
- `model`, and `priority` (lower runs first), as for embeddings;
- `truncate`: END (the default) keeps each text's first `max_tokens` tokens (absent: all that fit the model), START
  its last ones, NONE cuts nothing and refuses a text longer than `max_tokens` (vLLM's words);
- `output_dimension`: the engine's `dimensions` (a Matryoshka model only, else refused naming it);
- `embedding_types` (default ["float"]): float, base64 (little-endian float32 bytes), binary and ubinary (signs,
  1 for >= 0, packed 8 to a byte, most significant bit first; binary as signed bytes, ubinary as unsigned), the
  width a multiple of 8 for the packed ones (vLLM's words);
- `input_type`: refused with vLLM's words for a model that defines no task instructions (this deployment prepends
  none); any other field: UNSUPPORTED_FIELD naming it.
The answer is vLLM's CohereEmbedResponse with its unset fields left out: id `embd-<request_id>`, `embeddings` by
type, `texts` echoed, `meta.billed_units.input_tokens` (every text's tokens; `image_tokens` 0).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import numpy as np

from pipeline_svc.embeddings_request import refused, renamed, typed_field
from scaleout.v1 import engine_pb2, render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.json_body import load_object
from scaleout_common.openai_body_rules import parse_typed
from scaleout_common.reasons import Reason, fail

TYPES = ("float", "binary", "ubinary", "base64")
TRUNCATE = {"END": "", "START": "left"}  # END: the tokenizer's own side, as vLLM passes none
WHY = {
    "images": "is not supported: the model embeds text (send `texts`)",
    "inputs": "(content parts, rendered through a chat template) is not supported: send `texts`",
}


@dataclass
class CohereEmbedRequest:
    typed: render_pb2.RenderEmbeddingRequest
    texts: list[str]
    types: list[str] = field(default_factory=lambda: ["float"])
    most_tokens: int | None = None  # truncate NONE with max_tokens: a longer text is refused


def _texts(value) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(text, str) for text in value):
        raise fail(
            Reason.MISSING_PROMPT,
            "Exactly one of texts, images, or inputs must be provided, and it must be non-empty",  # vLLM's words
            "texts",
        )
    return value


def cohere_embed_request(body: bytes) -> CohereEmbedRequest:
    data = {k: v for k, v in load_object(body).items() if v is not None}
    parsed = CohereEmbedRequest(render_pb2.RenderEmbeddingRequest(), _texts(data.pop("texts", None)))
    out: dict = {"inputs": parsed.texts}
    truncate, max_tokens = data.pop("truncate", "END"), data.pop("max_tokens", None)
    if truncate not in (*TRUNCATE, "NONE"):
        raise fail(Reason.INVALID_REQUEST, "`truncate` must be NONE, START or END", "truncate")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise fail(Reason.INVALID_REQUEST, "`max_tokens` must be an integer", "max_tokens")
    if truncate == "NONE":
        parsed.most_tokens = max_tokens
    else:
        out["truncate_prompt_tokens"] = -1 if max_tokens is None else max_tokens
        out["truncation_side"] = TRUNCATE[truncate]
    for name, value in data.items():
        if name in ("model", "priority"):
            typed_field(name, value, out)
        elif name == "output_dimension":
            typed_field("dimensions", value, out)
        elif name == "embedding_types":
            if not isinstance(value, list) or not all(kind in TYPES for kind in value):
                raise fail(Reason.INVALID_REQUEST, f"`embedding_types` must list some of {list(TYPES)}", name)
            parsed.types = value or ["float"]
        elif name == "input_type":
            raise fail(
                Reason.UNSUPPORTED_FIELD,
                "Unsupported input_type. This model does not define any input_type task instructions.",
                name,
            )
        else:
            raise refused(name, WHY)
    parsed.typed = parse_typed(out, parsed.typed)
    return parsed


def check_lengths(request: CohereEmbedRequest, rendered: engine_pb2.EmbedRequest) -> None:
    """truncate NONE with max_tokens: a text longer than max_tokens is refused (vLLM's words)."""
    most = request.most_tokens
    for i, sequence in enumerate(rendered.inputs):
        if most is not None and len(sequence.token_ids) > most:
            raise fail(
                Reason.PROMPT_TOO_LONG,
                f"Input of {len(sequence.token_ids)} tokens exceeds max_tokens={most} with truncate=NONE. Set "
                "truncate to END or START to allow truncation.",
                f"texts[{i}]",
            )


def in_client_terms(error: ServiceError, request: CohereEmbedRequest) -> ServiceError:
    """`error` with render's and the engine's `inputs[i]` named `texts[i]`, `dimensions` `output_dimension`."""
    error = renamed(error, lambda i: f"texts[{i}]")
    error.violations = [("output_dimension" if n == "dimensions" else n, w) for n, w in error.violations]
    return error


def _packed(rows: np.ndarray, signed: bool) -> list[list[int]]:
    if rows.shape[1] % 8:
        raise fail(
            Reason.INVALID_REQUEST,
            f"Embedding dimension must be a multiple of 8 for binary embedding types, but got {rows.shape[1]}.",
            "embedding_types",
        )
    packed = np.packbits(rows >= 0, axis=-1).astype(np.int16)
    return (packed - 128 if signed else packed).tolist()


def cohere_body(response: engine_pb2.EmbedResponse, request: CohereEmbedRequest) -> dict:
    rows = np.array([list(item.values) for item in response.embeddings], dtype=np.float32)
    encode = {
        "float": lambda: rows.tolist(),
        "base64": lambda: [base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") for row in rows],
        "binary": lambda: _packed(rows, signed=True),
        "ubinary": lambda: _packed(rows, signed=False),
    }
    return {
        "id": f"embd-{response.request_id}",
        "embeddings": {kind: encode[kind]() for kind in dict.fromkeys(request.types)},
        "texts": request.texts,
        "meta": {
            "api_version": {"version": "2"},
            "billed_units": {"input_tokens": response.prompt_tokens, "image_tokens": 0},
        },
        "response_type": "embeddings_by_type",
    }
