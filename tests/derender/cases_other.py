"""Tool formats of the smaller families, written from each model card / reference template: (output, expected
content, expected calls)."""

from __future__ import annotations

from tests.derender.case_kit import _j, _objects, _table


def phi4_mini_cases():
    return _table(
        lambda calls, i: "functools" + _j(_objects(calls, i), i),
        [
            ('functools[{"name": "f", "parameters": {"a": 1}}]', "", [("f", {"a": 1})]),
            ("use functools.partial here", "use functools.partial here", []),
            ('functools [{"name": "f"}]', 'functools [{"name": "f"}]', []),  # the list follows the word at once
            ("functools[oops]", "functools[oops]", []),
        ],
    )  # fmt: skip
