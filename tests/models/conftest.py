"""A second model served through the whole stack (render, engine, derender, the one-hop service, Envoy): each
module gives its `stack` (`served`), the official openai SDK's `client` is shared."""

from __future__ import annotations

import contextlib

import pytest

from devstack.stack import Stack, StackConfig
from tests.sdks import openai_sdk


@contextlib.contextmanager
def served(folder, service_args: dict, log_dir):
    """The stack on the model folder `folder`, with each role's extra arguments."""
    config = StackConfig(port=0, model=str(folder), service_args=service_args, log_dir=log_dir)
    with Stack(config) as running:
        yield running


@pytest.fixture(scope="module")
def client(stack):
    with openai_sdk(stack.rest_url) as sdk:
        yield sdk
