"""vLLM's tests' `HfRunner` (their `tests.conftest.HfRunner` and `hf_runner` fixture) for embedding models: the HF
reference the pooling files hold the server's vectors and scores to.

vLLM's runner loads `SentenceTransformer(model_name)`. Every model name here is an alias of our model's folder
(hf_alias.py), which has no Sentence Transformers modules.json; for such a folder Sentence Transformers builds the
transformers base model with mean pooling over the attention mask, no normalization, texts stripped first. This
computes that with transformers (Sentence Transformers and its scipy / scikit-learn are not in the environment),
in float32 (the test's dtype is the reference's precision, not what it computes). Only that kind: a generation or
cross-encoder runner skips the case, naming it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer


class HfRunner:
    def __init__(self, model_name: str, dtype: str = "auto", *, is_sentence_transformer: bool = False, **_kwargs):
        if not is_sentence_transformer:
            pytest.skip("vLLM's HfRunner for a generative or cross-encoder model: not in scaleout's shim")
        self.model_name = model_name
        self.tokenizer = AutoTokenizer.from_pretrained(model_name)
        self.model = AutoModel.from_pretrained(model_name, dtype=torch.float32).eval()

    @torch.inference_mode()
    def encode(self, prompts: list[str], *_args, **_kwargs) -> np.ndarray:
        rows = []
        for text in prompts:
            batch = self.tokenizer(str(text).strip(), return_tensors="pt", truncation=True)
            hidden = self.model(**batch).last_hidden_state[0]
            rows.append(hidden.float().mean(dim=0).numpy())
        return np.stack(rows)

    def __enter__(self) -> HfRunner:
        return self

    def __exit__(self, *_exc) -> None:
        del self.model


@pytest.fixture(scope="session")
def hf_runner():
    return HfRunner
