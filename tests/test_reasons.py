"""The reason table (scaleout_common.reasons) is the only place a reason is spelled, and it is consistent."""

from __future__ import annotations

import ast
from pathlib import Path

from scaleout_common.reasons import HTTP_STATUS, Reason, table

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("scaleout_common", "render_svc", "engine_svc", "derender_svc", "pipeline_svc", "gateway", "devstack")
OWNER = ROOT / "scaleout_common" / "reasons.py"


def _string_constants(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_no_reason_is_spelled_outside_the_table():
    reasons = {r.value for r in Reason}
    found = [
        f"{path.relative_to(ROOT)}:{line}: {value}"
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != OWNER
        for line, value in _string_constants(path)
        if value in reasons
    ]
    assert not found, "raise fail(Reason.X, ...) instead of spelling the reason:\n" + "\n".join(found)


def test_every_reason_is_its_name_with_a_mapped_code():
    for reason in Reason:
        assert reason.value == reason.name
        assert reason.code in HTTP_STATUS or reason.http == 500, reason
        assert reason.when, reason
    assert "| INVALID_SAMPLING_PARAM" in table()


def test_every_reason_is_raised_somewhere_or_documented_as_the_gateways():
    """A reason nobody raises is dead: every entry is used by name in the product code."""
    used = set()
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if path != OWNER:
                used |= {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}
    assert not {r.name for r in Reason} - used
