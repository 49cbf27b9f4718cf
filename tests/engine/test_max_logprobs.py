"""`--max-logprobs` (vLLM's flag): the most alternatives a request's logprobs and prompt_logprobs may ask for, 20 by
default as vLLM's; past it a typed 400 naming the field (TRL's get_sequence_logprobs asks for 100)."""

from __future__ import annotations

import pytest

from engine_svc.scheduling.admission import admit
from scaleout_common.errors import ServiceError
from tests.engine.conftest import build_tiny, engine_args, request


@pytest.mark.parametrize(("flags", "most"), [((), 20), (("--max-logprobs", "100"), 100)])
def test_the_bound_is_the_flags(flags, most):
    limits = build_tiny(engine_args(*flags)).limits
    for field in ("logprobs", "prompt_logprobs"):
        admit(request([1, 5, 9], **{field: most}), limits)
        with pytest.raises(ServiceError) as refused:
            admit(request([1, 5, 9], **{field: most + 1}), limits)
        assert refused.value.reason == "INVALID_SAMPLING_PARAM" and refused.value.violations[0][0].endswith(field)


def test_minus_one_is_the_whole_vocabulary_and_less_is_refused_at_start():
    limits = build_tiny(engine_args("--max-logprobs", "-1")).limits
    assert limits.max_logprobs == limits.vocab_size
    _, (seq,), _ = admit(request([1, 5, 9], logprobs=limits.vocab_size, prompt_logprobs=-1), limits)
    assert seq.config.logprobs == seq.config.prompt_logprobs == limits.vocab_size
    with pytest.raises(SystemExit):
        engine_args("--max-logprobs", "-2")
