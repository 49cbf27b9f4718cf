"""Request templates run in the sandbox's worker processes (render_svc/sandbox.py).

Every known way past an in-process sandbox (building a huge value, holding the GIL in one big-integer operation,
looping) ends in its typed error within the deadline plus a little, on a real server that answers health
checks all the while and renders the next request as usual. Output equals apply_chat_template's, and a worker
that dies of something other than the deadline (the kernel's OOM killer, SIGXCPU) still gets a typed error.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
from multiprocessing.process import BaseProcess

import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from render_svc.prompt import Limits
from render_svc.template import TemplateRenderer
from scaleout.v1 import render_pb2, render_pb2_grpc
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason as r
from tests.render.calls import chat, expect
from tests.render.conftest import render_channel
from tests.render.fixtures import FAMILIES, cases

DEADLINE_S = 1.0
MEMORY_MB = 64  # small: a value built past it fails fast, far within the deadline
LOOPS = "{% set x = range(100000) | list %}{% for a in x %}{% for b in x %}{% endfor %}{% endfor %}"
PLAIN = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"

ATTACKS = {
    # values built past the memory limit: MemoryError in the worker
    "~ doubling": ("{% set s = 'ab' %}" + "{% set s = s ~ s %}" * 40 + "{{ s }}", r.TEMPLATE_OUTPUT_TOO_LARGE),
    "~ doubling in a namespace": (
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        r.TEMPLATE_OUTPUT_TOO_LARGE,
    ),
    "str.format width": ("{{ '{:>1000000000}'.format(1) }}", r.TEMPLATE_OUTPUT_TOO_LARGE),
    "% width": ("{{ '%999999999s' % 'x' }}", r.TEMPLATE_OUTPUT_TOO_LARGE),
    "repeat": ("{{ 'ab' * 10**8 }}", r.TEMPLATE_OUTPUT_TOO_LARGE),
    "list repeat": ("{{ [1] * 10**8 }}", r.TEMPLATE_OUTPUT_TOO_LARGE),
    "ljust": ("{{ 'x'.ljust(10**9) }}", r.TEMPLATE_OUTPUT_TOO_LARGE),
    "indent": ("{{ 'x' | indent(10**9, true) }}", r.TEMPLATE_OUTPUT_TOO_LARGE),
    "folded at compile time": (
        "{{ 'x' | center(3000000) | center(3900000) | center(3990000) }}" * 20,
        r.TEMPLATE_OUTPUT_TOO_LARGE,
    ),
    # within the memory limit, above the output cap (4M characters)
    "replace": ("{{ ('x' * 1000).replace('x', 'y' * 10000) }}", r.TEMPLATE_OUTPUT_TOO_LARGE),
    # one C call that holds the GIL for minutes, at compile time (constant folding) and at render time
    "big power": ("{{ 7 ** 99999999 }}", r.TEMPLATE_TIMEOUT),
    "repeated multiply": (
        "{% set ns = namespace(x=7) %}{% for i in range(64) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
        r.TEMPLATE_TIMEOUT,
    ),
    "nested loops": (LOOPS, r.TEMPLATE_TIMEOUT),
    "int to str": ("{{ 2 ** 100000 }}", r.TEMPLATE_ERROR),  # Python's int_max_str_digits
}


@pytest_asyncio.fixture(scope="module")
async def sandboxed():
    """(render stub, health stub) of a server that renders request templates with a short deadline."""
    async with render_channel(
        "--trust-request-chat-template",
        "--template-timeout-s",
        str(DEADLINE_S),
        "--template-memory-mb",
        str(MEMORY_MB),
        "--drain-delay-s",
        "0",
    ) as channel:
        stub = render_pb2_grpc.RenderServiceStub(channel)
        await plain_render_works(stub)  # the forkserver's first start (~1 s) is not an attack's time
        yield stub, health_pb2_grpc.HealthStub(channel)


async def plain_render_works(stub) -> None:
    response = await stub.RenderChat(chat(chat_template=PLAIN, return_prompt_text=True))
    assert response.prompt_text == "[user]hi"


@pytest.mark.parametrize("name", ATTACKS)
async def test_an_attack_ends_typed_in_time_and_the_server_stays_healthy(sandboxed, name):
    stub, health = sandboxed
    template, reason = ATTACKS[name]
    started = time.monotonic()
    attack = asyncio.ensure_future(expect(stub.RenderChat(chat(chat_template=template)), "INVALID_ARGUMENT", reason))
    while not attack.done():
        answer = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        await asyncio.sleep(0.05)
    await attack
    assert time.monotonic() - started < DEADLINE_S + 2
    await plain_render_works(stub)


async def test_attacks_on_every_worker_at_once(sandboxed):
    """Two attacks take both workers (and, on 2 cores, both render threads); a request sent with them renders."""
    stub, _ = sandboxed
    attacks = [expect(stub.RenderChat(chat(chat_template=LOOPS)), "INVALID_ARGUMENT", r.TEMPLATE_TIMEOUT) for _ in "ab"]
    started = time.monotonic()
    await asyncio.gather(*attacks, plain_render_works(stub))
    assert time.monotonic() - started < DEADLINE_S + 2


async def test_request_templates_render_as_apply_chat_template(sandboxed, renderers, reference_tokenizer):
    """Each family's template sent with the request, through the worker processes, as one batch."""
    stub, _ = sandboxed
    for family in FAMILIES:
        template = renderers[family].model.tokenizer.get_chat_template()
        requests = [case.request(chat_template=template, return_prompt_text=True) for case in cases()]
        batch = await stub.RenderChatBatch(render_pb2.RenderChatBatchRequest(requests=requests))
        for case, response in zip(cases(), batch.responses):
            assert response.prompt_text == case.reference(reference_tokenizer, template, tokenize=False), case.name


def sandbox_workers() -> list[BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name == "template-sandbox"]


@pytest.mark.parametrize(
    ("sent", "reason"), [(signal.SIGKILL, r.TEMPLATE_OUTPUT_TOO_LARGE), (signal.SIGXCPU, r.TEMPLATE_TIMEOUT)]
)
def test_a_worker_that_dies_gets_the_reason_of_its_signal(sent, reason):
    """SIGKILL from outside the server is the kernel's OOM killer; SIGXCPU is RLIMIT_CPU's backstop."""
    before = set(sandbox_workers())
    templates = TemplateRenderer(Limits(template_timeout_s=30, template_workers=1))
    try:
        template = templates.requested(LOOPS)  # starts the worker
        [worker] = set(sandbox_workers()) - before
        threading.Timer(0.3, os.kill, (worker.pid, sent)).start()
        started = time.monotonic()
        with pytest.raises(ServiceError) as caught:
            templates.render(template, [{"role": "user", "content": "hi"}])
        assert caught.value.reason == reason and time.monotonic() - started < 5
        assert templates.render(templates.requested(PLAIN), [{"role": "user", "content": "hi"}]) == "[user]hi"
    finally:
        templates.close()
