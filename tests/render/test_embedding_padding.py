"""Render's `pad_to_max_length` (vLLM's pooling `padding: "max_length"`): each input, cut and checked, filled to
the model length with the tokenizer's pad token, as vLLM's tokenize params pad it (the pads are input the model
reads and usage counts)."""

from __future__ import annotations

from render_svc.embedding import render_embedding
from scaleout.v1 import render_pb2


def rendered(renderer, **fields) -> list[list[int]]:
    request = render_pb2.RenderEmbeddingRequest(**fields)
    return [list(item.token_ids) for item in render_embedding(renderer, request).embed_request.inputs]


def test_inputs_are_filled_to_the_model_length_with_the_pad_token(renderers):
    renderer = renderers["default"]
    length, pad = renderer.model.max_model_len, renderer.model.tokenizer.pad_token_id
    plain = rendered(renderer, inputs=["Hello", "Paris is the capital of France."])
    padded = rendered(renderer, inputs=["Hello", "Paris is the capital of France."], pad_to_max_length=True)
    for ids, filled in zip(plain, padded, strict=True):
        assert filled == ids + [pad] * (length - len(ids))
    text = ["Paris is the capital of France."]
    cut = rendered(renderer, inputs=text, truncate_prompt_tokens=2, truncation_side="left", pad_to_max_length=True)
    assert cut == [plain[1][-2:] + [pad] * (length - 2)]  # cut first, then padded
