"""SGLang's stop_regex in derender's stop matcher: a match that completes in any feed ends the text (cut at the
match, or kept with include_stop), the pattern is what matched, a match may begin in text already shown, a
pattern that backtracks without end fails the request, and the render-side bounds."""

from __future__ import annotations

import pytest

from derender_svc.stop_matcher import StopMatcher
from scaleout_common.errors import ServiceError
from scaleout_common.sampling_rules import check_stop_regex


def _feed(matcher: StopMatcher, pieces: list[str]) -> str:
    shown = []
    for piece in pieces:
        shown.append(matcher.feed(piece, False))
        if matcher.matched is not None:
            break
    else:
        shown.append(matcher.feed("", True))
    return "".join(shown)


@pytest.mark.parametrize("include", [False, True])
def test_a_pattern_ends_the_text_where_its_match_completes(include):
    matcher = StopMatcher([], include, patterns=(r"\d+\.",))
    shown = _feed(matcher, ["Step ", "1", "2", ".", " more"])
    assert matcher.matched == r"\d+\."
    # "1" and "2" were shown before the "." completed the match: they stay shown, the cut takes what was not sent
    assert shown == ("Step 12." if include else "Step 12")
    assert StopMatcher([], include, patterns=(r"\d+\.",)).feed("Step 12. more", False) == (
        "Step 12." if include else "Step "
    )


def test_the_first_stop_to_complete_wins_between_strings_and_patterns():
    matcher = StopMatcher(["END"], False, patterns=("b+c",))
    assert matcher.feed("abbc then END", False) == "a" and matcher.matched == "b+c"
    matcher = StopMatcher(["bb"], False, patterns=("b+c",))
    assert matcher.feed("abbc", False) == "a" and matcher.matched == "bb"


def test_state_carries_the_shown_tail():
    matcher = StopMatcher([], False, patterns=("xy",))
    assert matcher.feed("aax", False) == "aax" and matcher.matched is None
    state = matcher.state()
    again = StopMatcher([], False, state["h"], state["m"], ("xy",), state["r"])
    assert again.feed("yz", False) == "" and again.matched == "xy"


def test_a_pattern_that_backtracks_without_end_fails_the_request():
    matcher = StopMatcher([], False, patterns=("(x+x+)+y",))
    with pytest.raises(ServiceError) as failed:
        matcher.feed("x" * 1000, False)
    assert failed.value.reason == "INVALID_SAMPLING_PARAM" and failed.value.violations[0][0] == "stop_regex"


@pytest.mark.parametrize(
    ("patterns", "field", "reason"),
    [
        (["("], "stop_regex[0]", "INVALID_SAMPLING_PARAM"),
        (["ok", "a*"], "stop_regex[1]", "INVALID_SAMPLING_PARAM"),
        (["a"] * 33, "stop_regex", "TOO_MANY_STOP_STRINGS"),
        (["a" * 257], "stop_regex", "TOO_MANY_STOP_STRINGS"),
    ],
)
def test_bounds_as_sglangs(patterns, field, reason):
    with pytest.raises(ServiceError) as refused:
        check_stop_regex(patterns, "stop_regex")
    assert refused.value.reason == reason and refused.value.violations[0][0] == field
