"""One stack with two pipeline (one-hop) replicas behind Envoy, and derender reading `<think>` reasoning: stored
Responses must be found whichever replica a call lands on, and the reasoning fields need reasoning to act on."""

import pytest

from devstack.stack import Stack, StackConfig
from tests.sdks import openai_sdk


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    config = StackConfig(
        port=0,
        log_dir=tmp_path_factory.mktemp("stack-logs"),
        replicas={"render": 1, "engine": 1, "derender": 1, "chat": 2},
        service_args={"derender": ["--reasoning-parser", "think"]},
    )
    with Stack(config) as running:
        yield running


@pytest.fixture(scope="package")
def client(stack):
    """The official `openai` SDK pointed at the gateway."""
    with openai_sdk(stack.rest_url) as sdk:
        yield sdk


@pytest.fixture(scope="package")
def model_id(client) -> str:
    return client.models.list().data[0].id
