import pytest

from devstack.stack import Stack, StackConfig


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    """The whole stack: real render, engine, derender and chat processes on the default model, real Envoy; render
    serves vLLM's opt-in `/tokenizer_info` (test_vllm_routes); logprobs up to 100 alternatives (TRL's
    get_sequence_logprobs default, tests/clients/test_trl_client.py)."""
    config = StackConfig(
        port=0,
        log_dir=tmp_path_factory.mktemp("stack-logs"),
        service_args={"render": ["--enable-tokenizer-info-endpoint"]},
        max_logprobs=100,
    )
    with Stack(config) as running:
        yield running


@pytest.fixture(scope="package")
def fleet(tmp_path_factory):
    """The stack with two engine replicas, shared by the modules that only read it (test_metrics_route first: it
    counts every call's tokens; test_router_surface, which pauses the derender replica, last)."""
    config = StackConfig(
        port=0,
        replicas={"render": 1, "engine": 2, "derender": 1, "chat": 1},
        log_dir=tmp_path_factory.mktemp("fleet-logs"),
    )
    with Stack(config) as running:
        yield running
