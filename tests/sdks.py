"""The official SDKs as the tests point them at a stack's gateway."""

from __future__ import annotations

import openai


def openai_sdk(rest_url: str, timeout: float = 120) -> openai.OpenAI:
    """The `openai` SDK on the gateway at `rest_url` (its /v1 routes), without retries: a test sees each answer."""
    return openai.OpenAI(base_url=rest_url + "/v1", api_key="unused", max_retries=0, timeout=timeout)
