"""Real clients (the official `openai` SDKs, a raw SSE reader) against the real stack behind the real Envoy: `stack`,
shared with tests/gateway (tests/conftest.py); `pooling_stack`, one whose engine pools (--runner pooling), shared by
the pooling routes' modules (test_embeddings.py, test_pooling_routes.py)."""

from __future__ import annotations

import openai
import pytest

from tests.sdks import openai_sdk


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


@pytest.fixture(scope="package")
def pooling_stack(tmp_path_factory):
    from devstack.stack import Stack, StackConfig

    config = StackConfig(
        port=0, log_dir=tmp_path_factory.mktemp("pooling-stack"), service_args={"engine": ["--runner", "pooling"]}
    )
    with Stack(config) as running:
        yield running


@pytest.fixture(scope="package")
def pooling_client(pooling_stack):
    with openai_sdk(pooling_stack.rest_url) as sdk:
        yield sdk
