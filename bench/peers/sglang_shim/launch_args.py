"""SGLang's `launch_server` flags, as its tests pass them to popen_launch_server, sorted into three kinds.

Flags that only tune an SGLang deployment (memory, kernels, scheduling, which grammar library) are dropped: the
API answers the same without them. `--enable-custom-logit-processor` is dropped too: it only lets requests carry
a `custom_logit_processor`, which our `/generate` refuses by name (400 UNSUPPORTED_FIELD), so the tests that send
one meet that refusal. A flag that changes what the API answers and that we lack, or one not listed, is
`Unsupported`: the shim skips the test class naming it (classified, not faked).
"""

from __future__ import annotations

# flag -> how many values follow it
IGNORED = {
    "--mem-fraction-static": 1,
    "--cuda-graph-max-bs": 1,
    "--max-running-requests": 1,
    "--grammar-backend": 1,
    "--disable-overlap-schedule": 0,
    "--attention-backend": 1,
    "--chunked-prefill-size": 1,
    "--disable-radix-cache": 0,
    "--enable-metrics": 0,  # our metrics are always served
    "--trust-remote-code": 0,
    "--tp": 1,
    "--tp-size": 1,
    "--random-seed": 1,
    "--log-level": 1,
    "--enable-custom-logit-processor": 0,
}
UNSERVED = {
    "--skip-tokenizer-init": "token ids in and out without a tokenizer (SGLang's answer then has no text)",
    "--is-embedding": "embedding and rerank models are not served",
}


class Unsupported(Exception):
    """A launch flag that changes the API's answers and that this stack does not serve."""


def check(args: list[str] | tuple[str, ...]) -> None:
    """Raise Unsupported for the first flag that is not deployment tuning."""
    args = [str(a) for a in args]
    i = 0
    while i < len(args):
        flag = args[i].split("=", 1)[0]
        if flag in UNSERVED:
            raise Unsupported(f"{flag}: {UNSERVED[flag]}")
        if flag not in IGNORED:
            raise Unsupported(f"{flag}: not mapped onto scaleout")
        i += 1 if "=" in args[i] else 1 + IGNORED[flag]
