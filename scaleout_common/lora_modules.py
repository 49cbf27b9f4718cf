"""vLLM's `--lora-modules` values, one parser for the engine (which loads the folders) and render (which serves
the names: the OpenAI `model` that selects an adapter, /v1/models' cards). Both forms vLLM takes: `name=path` and
the JSON object `{"name", "path", "base_model_name"}`."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class LoraModule:
    name: str
    path: str
    base_model_name: str = ""  # the parent /v1/models names ("": the served model)


def add_flags(parser) -> None:
    parser.add_argument("--enable-lora", action="store_true", help="serve LoRA adapters (vLLM's flag)")
    parser.add_argument(
        "--lora-modules",
        nargs="+",
        default=[],
        help='adapters served at start: name=path, or JSON {"name", "path", "base_model_name"} (vLLM\'s forms)',
    )


def parse(values: list[str], enabled: bool) -> list[LoraModule]:
    """--lora-modules' values as vLLM parses them; ValueError naming the flag for a malformed one, or for adapters
    without --enable-lora."""
    if values and not enabled:
        raise ValueError("--lora-modules needs --enable-lora")
    modules = []
    for value in values:
        if value.lstrip().startswith("{"):
            try:
                item = json.loads(value)
                modules.append(LoraModule(str(item["name"]), str(item["path"]), str(item.get("base_model_name") or "")))
            except (ValueError, KeyError, TypeError, AttributeError):
                raise ValueError(f'--lora-modules: {value[:120]!r} is not {{"name", "path"}} JSON') from None
        else:
            name, sep, path = value.partition("=")
            if not sep or not name or not path:
                raise ValueError(f"--lora-modules: {value[:120]!r} is not name=path")
            modules.append(LoraModule(name, path))
    if len({m.name for m in modules}) < len(modules):
        raise ValueError("--lora-modules: a name is given twice")
    return modules
