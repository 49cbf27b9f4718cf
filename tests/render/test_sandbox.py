"""The template guards on their own: the watchdog stops pure-Python loops on any thread and never leaves a stray
exception behind; the size guard refuses what would build oversized values."""

from __future__ import annotations

import threading
import time

import pytest

from render_svc.sandbox import TemplateTimeout, TemplateTooLarge, Watchdog
from render_svc.template import TemplateRenderer


def spin(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "done"


def test_watchdog_stops_a_loop_on_this_thread():
    watchdog = Watchdog(interval=0.005)
    with pytest.raises(TemplateTimeout):
        watchdog.run(0.05, spin, 10)
    assert watchdog.run(1.0, spin, 0.01) == "done"


def test_watchdog_stops_a_loop_on_a_worker_thread():
    watchdog, outcome = Watchdog(interval=0.005), []

    def worker():
        try:
            watchdog.run(0.05, spin, 10)
        except TemplateTimeout:
            outcome.append("timeout")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(5)
    assert outcome == ["timeout"]


def test_no_stray_exception_when_work_ends_at_the_deadline():
    """Work that ends right around its deadline either returns or raises inside run(), never later."""
    watchdog = Watchdog(interval=0.001)
    outcomes = set()
    for _ in range(150):
        try:
            outcomes.add(watchdog.run(0.004, spin, 0.004))
        except TemplateTimeout:
            outcomes.add("timeout")
        spin(0.002)  # a stray exception would surface here and fail the test
    assert outcomes <= {"done", "timeout"}


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'ab' * 10**8 }}",
        "{{ [1] * 10**8 }}",
        "{{ 2 ** 100000 }}",
        "{{ '%9999999999s' % 'x' }}",
        "{{ 'x'.ljust(10**9) }}",
        "{{ ('x' * 1000).replace('x', 'y' * 10000) }}",
        "{{ 'x' | indent(10**9, true) }}",
    ],
)
def test_size_guard(source):
    renderer = TemplateRenderer(max_chars=1_000_000, timeout_s=5)
    template = renderer.compiled(source)
    with pytest.raises(Exception) as caught:
        renderer.render(template, [])
    assert getattr(caught.value, "reason", None) == "TEMPLATE_OUTPUT_TOO_LARGE", caught.value
    assert TemplateTooLarge.__mro__[1] is BaseException  # Jinja's `except Exception` cannot swallow it
