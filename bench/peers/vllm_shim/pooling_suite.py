"""vLLM's pooling-server tests (tests/entrypoints/pooling of vLLM 0.33.0) over an embedding model: /v1/embeddings,
/pooling, /score, /rerank, Cohere's /v2/embed. Staged and served as the OpenAI suite (suite.py), with the engine a
pooling runner: vLLM's `--runner auto` makes every model these files name a pooling one (BERT-style encoders, from
their architecture), which the alias of our causal LM does not tell, so the suite says it (SCALEOUT_PEER_RUNNER).

Left out, another kind of server: cross-encoders and classifiers (`scoring/test_cross_encoder_*`, `classify/`: a
classifier head over the pair), late interaction and token-wise pooling (`scoring/test_late_interaction_*`,
`token_embed/`, `token_classify/`, `reward/`: a vector per token), multimodal models (`*_vision.py`); and files
with no server: the offline `LLM` ones (`*_offline.py`, `basic/test_encode.py`, `basic/test_tiling_engine.py`),
vLLM's own objects in-process (`test_io_processor.py`, `test_utils.py`, `test_factories.py`, `embed/test_protocol.py`,
`embed/test_io_processor.py`, `scoring/test_*_unit.py`, `scoring/test_utils.py`), and `embed/test_correctness_mteb.py`
(an MTEB accuracy run against the real e5-small's published score).
"""

from __future__ import annotations

from pathlib import Path

from bench.peers.vllm_shim import suite

_POOLING = "tests/entrypoints/pooling/"
FILES: tuple[str, ...] = tuple(
    _POOLING + f
    for f in (
        "embed/test_online.py",
        "embed/test_online_dimensions.py",
        "embed/test_online_long_text.py",
        "embed/test_cohere_online.py",
        "embed/test_cohere_openai_parity.py",
        "basic/test_truncation.py",
        "scoring/test_bi_encoder_online.py",
    )
)
SUPPORT: tuple[str, ...] = (
    "tests/entrypoints/conftest.py",
    "tests/ci_envs.py",
    "tests/models/utils.py",
    "tests/models/registry.py",
    "tests/models/language/pooling/embed_utils.py",
    _POOLING + "scoring/util.py",
)


def prepare(staged: Path, files: list[Path], env: dict[str, str]) -> None:
    suite.prepare(staged, files, env)
    env["SCALEOUT_PEER_RUNNER"] = "pooling"
