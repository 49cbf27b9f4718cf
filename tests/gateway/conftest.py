import pytest

from devstack.stack import Stack, StackConfig


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    """The whole stack: real render, engine, derender and chat processes on the default model, real Envoy."""
    with Stack(StackConfig(port=0, log_dir=tmp_path_factory.mktemp("stack-logs"))) as running:
        yield running
