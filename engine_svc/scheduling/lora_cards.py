"""The LoRA adapters an engine serves, as admission and the model list see them (no weights: serving/loras.py
holds those): a name's card, and the adapter id a request's `lora_name` runs with."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine_svc.scheduling.sequence import Sequence
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail


@dataclass(frozen=True)
class LoraCard:
    id: int  # > 0, never reused in the engine's life (prefix-cache entries are keyed by it)
    path: str
    base_model_name: str = ""  # the parent /v1/models names ("": the served model)


def adapter_names(seqs: Iterable[Sequence]) -> list[str]:
    """The adapters `seqs` run with, by name, each once in the order met (the base model not named)."""
    return list(dict.fromkeys(s.lora_name for s in seqs if s.lora_name))


def lora_id(name: str, cards: dict[str, LoraCard] | None) -> int:
    """The adapter id of a request's `lora_name` (0: none named); LORA_NOT_FOUND when the engine does not serve it."""
    if not name:
        return 0
    card = (cards or {}).get(name)
    if card is None:
        served = ", ".join(sorted(cards)[:8]) if cards else "none: the engine runs without --enable-lora"
        raise fail(Reason.LORA_NOT_FOUND, f"LoRA adapter {quote(name)} is not served (adapters: {served})", "lora_name")
    return card.id
