"""LoRA adapters as vLLM 0.33 serves them: its flags, the adapters an engine serves by name, loads and unloads.

Flags (vLLM's names and defaults): `--enable-lora`; `--lora-modules name=path ...` (or vLLM's JSON form
`{"name", "path", "base_model_name"}`), read at start; `--max-loras` (1: distinct adapters among the running
sequences, so in one step; the scheduler admits a sequence of another adapter only once one finishes);
`--max-lora-rank` (16); `--max-cpu-loras` (default --max-loras: adapters held at once, or the --lora-modules if
more; a load past it is refused). Unlike vLLM, which keeps `--max-cpu-loras` adapters in host memory (an LRU) and
`--max-loras` on the GPU, every adapter loaded is held on the model's device (an adapter of rank 16 on an 8B model:
~80 MB in bf16), and `--lora-modules` are read at start rather than on their first request. Adapter ids start at 1 (0: the base
model) and are never reused, so prefix-cache entries of an unloaded adapter never serve a new one of its name.

A `LoraCard` (scheduling/lora_cards.py) is what admission and the model list see (it crosses to API servers in
EngineLimits); `LoraRegistry` (the step loop's) owns the weights. Refusals are `LoraRefused` (ValueError) naming
the flag or field; at start they stop the engine, at run time they are `LORA_REFUSED`.
"""

from __future__ import annotations

from engine_svc.model.lora import LoraRefused, Loras, read_adapter
from engine_svc.scheduling.lora_cards import LoraCard
from scaleout.v1 import engine_pb2
from scaleout_common import lora_modules


def add_flags(parser) -> None:
    lora_modules.add_flags(parser)  # --enable-lora, --lora-modules (render takes them too)
    parser.add_argument("--max-loras", type=int, default=1, help="distinct LoRA adapters running at once")
    parser.add_argument("--max-lora-rank", type=int, default=16, help="the largest LoRA rank served")
    parser.add_argument("--max-cpu-loras", type=int, default=0, help="LoRA adapters held at once (0: --max-loras)")


def parse_modules(args) -> list[lora_modules.LoraModule]:
    """--lora-modules (LoraRefused, naming the flag, where malformed or given without --enable-lora)."""
    try:
        return lora_modules.parse(args.lora_modules, args.enable_lora)
    except ValueError as error:
        raise LoraRefused(str(error)) from None


def check_flags(args, backend: str, quantization: str) -> bool:
    """Whether LoRA is on; refuses (LoraRefused, naming the flag) what cannot go with it."""
    if not args.enable_lora:
        return False
    if backend != "paged":
        raise LoraRefused("--enable-lora needs the paged backend (the fast-path families), not the transformers one")
    if quantization != "none":
        raise LoraRefused(f"--enable-lora: not with --quantization {quantization} (adapters run on the model's dtype)")
    if args.max_loras < 1 or args.max_lora_rank < 1:
        raise LoraRefused("--max-loras and --max-lora-rank must be at least 1")
    if args.max_cpu_loras and args.max_cpu_loras < args.max_loras:
        raise LoraRefused(f"--max-cpu-loras ({args.max_cpu_loras}) must be at least --max-loras ({args.max_loras})")
    return True


class LoraRegistry:
    """The adapters an engine serves: name -> card, their weights attached to the model (`Loras`). Runs where the
    model is (the step loop's thread or the engine core process)."""

    def __init__(self, loras: Loras, args, at_start: int = 0):
        """`at_start`: the adapters --lora-modules names, which are all held whatever --max-cpu-loras says."""
        self.loras = loras
        self.max_rank = args.max_lora_rank
        self.capacity = max(args.max_cpu_loras or args.max_loras, at_start)
        self.cards: dict[str, LoraCard] = {}
        self.next_id = 1

    def load(self, name: str, path: str, base_model_name: str = "") -> LoraCard:
        if name in self.cards:
            raise LoraRefused(f"LoRA adapter {name!r} is already loaded")
        if len(self.cards) >= self.capacity:
            raise LoraRefused(f"{self.capacity} LoRA adapters are loaded already (--max-cpu-loras): unload one first")
        adapter = read_adapter(name, path, self.max_rank)
        card = LoraCard(self.next_id, str(path), base_model_name or adapter.base_model_name)
        self.loras.add(card.id, adapter)
        self.next_id += 1
        self.cards[name] = card
        return card

    def unload(self, name: str, in_use: set[int]) -> LoraCard | None:
        """Drop `name` (None: not served); its weights stay attached while `in_use` (running ids) holds it, and
        are dropped by the next unload or load (`sweep`)."""
        card = self.cards.pop(name, None)
        self.sweep(in_use)
        return card

    def sweep(self, in_use: set[int]) -> None:
        """Detach the weights of unloaded adapters no sequence runs with any more."""
        served = {card.id for card in self.cards.values()} | in_use
        for adapter_id in self.loras.attached - served:
            self.loras.remove(adapter_id)


def lora_config(args) -> engine_pb2.LoraConfig:
    """GetModelInfo's lora_config: the flags, --max-cpu-loras resolved as vLLM does."""
    return engine_pb2.LoraConfig(
        max_lora_rank=args.max_lora_rank, max_loras=args.max_loras, max_cpu_loras=args.max_cpu_loras or args.max_loras
    )
