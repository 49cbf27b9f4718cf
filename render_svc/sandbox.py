"""DoS guards for chat templates: an output cap inside the sandbox and a wall-clock timeout around it.

Templates run in Jinja's ImmutableSandboxedEnvironment with transformers' globals and filters (so output equals
apply_chat_template's). On top of that:
- size: `+ * ** %` are intercepted, and every call and filter is checked, so no string or list larger than the
  cap is built, and no width/count argument above the cap is passed (`'x' * 10**9`, `x|center(10**9)`);
  the rendered output itself is counted piece by piece.
- time: a watchdog thread raises `TemplateTimeout` inside the rendering thread (PyThreadState_SetAsyncExc) once
  the deadline passes, which stops pure-Python loops the sandbox cannot see (`{% for a in x %}{% for b in x %}`).
"""

from __future__ import annotations

import ctypes
import re
import threading
import time

from jinja2 import pass_context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import _PassArg


class TemplateTimeout(BaseException):
    """Raised asynchronously in a thread whose render passed its deadline. A BaseException, so that Jinja's own
    `except Exception` (constant folding at compile time) cannot swallow it."""


class TemplateTooLarge(BaseException):
    """A BaseException for the same reason: a size bomb in a constant expression fails the compile."""


# "%1000000s" % x: the width alone allocates.
_BIG_FORMAT_WIDTH = re.compile(r"%[-+ #0]*(\d{7,}|\*)|%[-+ #0]*\d*\.(\d{7,}|\*)")


def _check_args(args, kwargs, limit: int) -> None:
    for value in (*args, *kwargs.values()):
        if type(value) is int and value > limit:
            raise TemplateTooLarge(f"argument {value} is above the template size limit ({limit})")


def _check_size(value, limit: int):
    if isinstance(value, (str, list, tuple)) and len(value) > limit:
        raise TemplateTooLarge(f"the template built a value of {len(value)} items (limit {limit})")
    return value


class GuardedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, refusing to build values larger than `max_chars`."""

    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def __init__(self, max_chars: int, **kwargs):
        super().__init__(**kwargs)
        self.max_chars = max_chars

    def call_binop(self, context, operator, left, right):
        limit = self.max_chars
        if operator == "+":  # the hot path: templates concatenate a lot
            result = left + right
            if type(result) in (str, list) and len(result) > limit:
                raise TemplateTooLarge(f"the template built a value of {len(result)} items (limit {limit})")
            return result
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and type(count) is int and len(seq) * count > limit:
                    raise TemplateTooLarge(f"repeating a value {count} times exceeds the template size limit ({limit})")
        elif operator == "**":
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and abs(left) > 1
                and right * max(abs(left).bit_length(), 1) > 4096
            ):
                raise TemplateTooLarge("integer power too large for a template")
        elif operator == "%" and isinstance(left, str) and _BIG_FORMAT_WIDTH.search(left):
            raise TemplateTooLarge("format width too large for a template")
        return _check_size(super().call_binop(context, operator, left, right), limit)

    def call(__self, __context, __obj, *args, **kwargs):
        _check_args(args, kwargs, __self.max_chars)
        if getattr(__obj, "__name__", None) == "replace" and isinstance(getattr(__obj, "__self__", None), str) and args:
            new = args[1] if len(args) > 1 else ""
            if isinstance(new, str) and len(__obj.__self__) * (len(new) + 1) > __self.max_chars:
                raise TemplateTooLarge("str.replace could exceed the template size limit")
        return _check_size(super().call(__context, __obj, *args, **kwargs), __self.max_chars)


def guard_filter(function, limit: int):
    """A filter that refuses oversized arguments and results. It takes the template context, which also keeps
    Jinja from running it at compile time on constant arguments (constant folding, outside every guard)."""
    wants = _PassArg.from_obj(function)

    @pass_context
    def guarded(context, *args, **kwargs):
        _check_args(args, kwargs, limit)
        if wants is _PassArg.context:
            args = (context, *args)
        elif wants is _PassArg.eval_context:
            args = (context.eval_ctx, *args)
        elif wants is _PassArg.environment:
            args = (context.environment, *args)
        return _check_size(function(*args, **kwargs), limit)

    guarded.__name__ = getattr(function, "__name__", "filter")
    return guarded


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc


class _Deadline:
    __slots__ = ("at", "fired", "thread_id")

    def __init__(self, thread_id: int, at: float):
        self.thread_id, self.at, self.fired = thread_id, at, False


class Watchdog:
    """One thread that interrupts renders past their deadline (checked every `interval` seconds)."""

    def __init__(self, interval: float = 0.02):
        self.interval = interval
        self._lock = threading.Lock()
        self._active: dict[int, _Deadline] = {}
        self._thread: threading.Thread | None = None

    def run(self, seconds: float, function, *args):
        """`function(*args)`, raising TemplateTimeout if it runs longer than `seconds`."""
        deadline = _Deadline(threading.get_ident(), time.monotonic() + seconds)
        key = id(deadline)
        with self._lock:
            self._active[key] = deadline
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="template-watchdog", daemon=True)
                self._thread.start()
        try:
            try:
                return function(*args)
            finally:
                with self._lock:
                    self._active.pop(key, None)
                    if deadline.fired:  # drop the exception if it is still pending
                        _set_async_exc(ctypes.c_ulong(deadline.thread_id), None)
        except TemplateTimeout:
            with self._lock:
                self._active.pop(key, None)
            raise TemplateTimeout(f"template rendering took longer than {seconds:g} s") from None

    def _watch(self) -> None:
        while True:
            time.sleep(self.interval)
            now = time.monotonic()
            with self._lock:
                for deadline in self._active.values():
                    if not deadline.fired and now > deadline.at:
                        deadline.fired = True
                        _set_async_exc(ctypes.c_ulong(deadline.thread_id), ctypes.py_object(TemplateTimeout))


#: The process's watchdog: one thread serves every renderer.
WATCHDOG = Watchdog()
