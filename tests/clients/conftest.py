"""Real clients (the official `openai` SDKs, a raw SSE reader) against the real stack behind the real Envoy: `stack`,
shared with tests/gateway (tests/conftest.py)."""

from __future__ import annotations

import openai
import pytest


@pytest.fixture(scope="package")
def base_url(stack) -> str:
    return stack.rest_url + "/v1"


@pytest.fixture(scope="package")
def client(base_url):
    """The official Python SDK as a user would point it at the gateway (no retries: a failure shows as is)."""
    with openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120) as sdk:
        yield sdk


@pytest.fixture(scope="package")
def model_id(client) -> str:
    return client.models.list().data[0].id
