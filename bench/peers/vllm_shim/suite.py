"""vLLM's OpenAI-server tests (tests/entrypoints/openai of vLLM 0.33.0) that talk to a running server.

Left out: the files that test vLLM's own Python objects in-process (protocol models, serving classes with mocked
engines, parsers: test_serving_*, test_*_error.py, test_stop_token_ids, test_session_id, ...), which have no
server to point elsewhere, and correctness/test_lmeval (an accuracy run of a 1.5B model).
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.peers.vllm_shim import hf_alias
from scaleout_common.models import resolve_model

HOW = (
    "unpack the tests of vLLM's sdist, the same tree as the installed wheel: `pip download --no-deps "
    "--no-binary :all: vllm==0.33.0` resolves vllm-0.33.0.tar.gz (its build step fails here; take the tarball it "
    "fetched), then `tar xzf vllm-0.33.0.tar.gz -C ~/.cache/scaleout/peers vllm-0.33.0/tests "
    "vllm-0.33.0/examples/template_chatml.jinja`; the imports of the tests "
    "that vLLM's wheel does not require: `pip install --no-deps --target ~/.cache/scaleout/peers/vllm-test-site einops "
    "mistral_common pydantic_extra_types pycountry`"
)
# Test-only packages (vLLM modules its tests import), kept out of the project's environment.
TEST_SITE = Path.home() / ".cache" / "scaleout" / "peers" / "vllm-test-site"

_OPENAI = "tests/entrypoints/openai/"
FILES: tuple[str, ...] = tuple(
    _OPENAI + f
    for f in (
        "models/test_models.py",
        "completion/test_completion.py",
        "completion/test_prompt_validation.py",
        "completion/test_token_in_token_out.py",
        "completion/test_completion_with_prompt_embeds.py",
        "chat_completion/test_chat.py",
        "chat_completion/test_chat_completion.py",
        "chat_completion/test_chat_echo.py",
        "chat_completion/test_chat_logit_bias_validation.py",
        "chat_completion/test_enable_force_include_usage.py",
        "chat_completion/test_logprob_token_ids.py",
        "chat_completion/test_root_path.py",
        "chat_completion/test_batched_chat_completions.py",
        "chat_completion/test_include_reasoning.py",
        "chat_completion/test_completion_with_function_calling.py",
        "chat_completion/test_thinking_token_budget.py",
        "chat_completion/test_extra_content_fields.py",
        "chat_completion/test_chat_completion_with_prompt_embeds.py",
        "test_return_token_ids.py",
        "test_return_tokens_as_ids.py",
        "test_chunked_prompt.py",
        "decisions/test_decisions_e2e.py",
        "responses/test_basic.py",
        "responses/test_simple.py",
        "responses/test_stateful.py",
        "responses/test_structured_output.py",
        "responses/test_function_call.py",
    )
) + tuple(
    "tests/entrypoints/" + f  # the other server suites of vLLM's entrypoints
    for f in (
        "generate/structured_decisions/test_structured_decisions_e2e.py",  # /v1/systemone
        "generate/generative_scoring/test_generative_scoring_e2e.py",
        "scale_out/render/test_render.py",
        "scale_out/derender/test_derender.py",
        "scale_out/derender/test_derender_stream.py",
        "scale_out/derender/test_derender_parity.py",
        "scale_out/token_in_token_out/test_serving_tokens.py",
        "anthropic/test_messages.py",
        "cohere/test_chat_v2.py",
        "serve/tokenize/test_tokenization.py",
        "serve/instrumentator/test_basic.py",
        "serve/instrumentator/test_metrics.py",
        "rl/state_transitions/test_sleep.py",
    )
)
SUPPORT: tuple[str, ...] = (
    "tests/entrypoints/conftest.py",
    _OPENAI + "utils.py",
    _OPENAI + "responses/conftest.py",
    _OPENAI + "chat_completion/test_serving_chat.py",  # test_batched_chat_completions imports its MockModelConfig
    "tests/entrypoints/scale_out/derender/utils.py",  # the derender stream and parity files' helpers
    "tests/entrypoints/scale_out/derender/test_derender.py",  # test_derender_stream imports its harmony fixtures
    "examples/template_chatml.jinja",  # test_chat_completion_with_prompt_embeds's --chat-template (VLLM_PATH / ...)
)
SHIMS = {
    "tests/utils.py": "bench.peers.vllm_shim.utils",
    "tests/conftest.py": "bench.peers.vllm_shim.plugin",
}


def prepare(staged: Path, files: list[Path], env: dict[str, str]) -> None:
    """The model names the files ask for, as offline hub entries of the model the stack serves (hf_alias)."""
    cache = staged / "hf-cache"
    hf_alias.alias(hf_alias.model_names(files), resolve_model(env.get("SCALEOUT_PEER_MODEL") or None), cache)
    env |= {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if TEST_SITE.is_dir():
        env["PYTHONPATH"] += os.pathsep + str(TEST_SITE)
