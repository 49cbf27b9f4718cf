"""Which fp8 layout a checkpoint's quantization_config declares, or why the engine refuses it (naming the field).

- `quant_method: "fp8"` (transformers' FineGrainedFP8 / vLLM's Fp8Config): block-wise where `weight_block_size`
  is set (DeepSeek V3/R1, Kimi K2, Qwen3-*-FP8: [128, 128], activations "dynamic"; weights' scales in
  `<name>.weight_scale_inv`), else per tensor (`<name>.weight_scale`, a static `<name>.input_scale`);
- `quant_method: "compressed-tensors"` (llm-compressor's FP8 / FP8-dynamic / FP8-block exports, e.g. RedHatAI's):
  every config group's weights 8-bit floats, symmetric, per tensor, channel (a scale per output row) or block
  (`block_structure`), scales in `<name>.weight_scale`; input activations fp8 or none.
Activation scales are never used: the engine quantizes each token's activations with a scale of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

FP8_FIELDS = {"quant_method", "fmt", "activation_scheme", "weight_block_size", "scale_fmt", "modules_to_not_convert",
              "ignored_layers"}  # fmt: skip
CT_FIELDS = {"quant_method", "format", "quantization_status", "config_groups", "ignore", "kv_cache_scheme",
             "sparsity_config", "transform_config", "global_compression_ratio", "version"}  # fmt: skip
READ_METHODS = ("fp8", "compressed-tensors", "mxfp4")  # mxfp4: gpt-oss's experts (mxfp4_load.py)
ROOT = "quantization_config"


class UnsupportedQuantization(ValueError):
    """A checkpoint's quantization_config that the engine cannot honour; `field` names the config.json field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Fp8Scheme:
    block: tuple[int, int] | None  # (rows, columns) of a scale's block; None: per tensor (or per row)


def declared_quantization(config) -> dict:
    """config.json's quantization_config as a dict ({} when none)."""
    declared = getattr(config, "quantization_config", None) or {}
    return declared if isinstance(declared, dict) else declared.to_dict()


def fp8_scheme(config) -> Fp8Scheme | None:
    """The checkpoint's fp8 layout, None when it declares no fp8; UnsupportedQuantization for a quant_method the
    engine does not read or fields it cannot honour."""
    declared = declared_quantization(config)
    method = declared.get("quant_method", "") or ""
    method = str(getattr(method, "value", method))  # transformers' QuantizationMethod enum, or config.json's string
    if method and method not in READ_METHODS:
        raise UnsupportedQuantization(
            f"{ROOT}.quant_method", f"{method!r} checkpoints are not read (the engine reads {', '.join(READ_METHODS)})"
        )
    if method == "compressed-tensors":
        return _compressed_tensors(declared)
    return _fp8(declared) if method == "fp8" else None


def _fp8(declared: dict) -> Fp8Scheme:
    _known_fields(declared, FP8_FIELDS)
    if (fmt := declared.get("fmt", "e4m3")) != "e4m3":
        raise UnsupportedQuantization(f"{ROOT}.fmt", f"{fmt!r}: only e4m3 weights are read")
    scheme = declared.get("activation_scheme", "dynamic")
    if scheme not in ("dynamic", "static"):
        raise UnsupportedQuantization(f"{ROOT}.activation_scheme", f"{scheme!r} is not dynamic or static")
    if (scale_fmt := declared.get("scale_fmt") or "float") not in ("float", "ue8m0"):
        raise UnsupportedQuantization(f"{ROOT}.scale_fmt", f"{scale_fmt!r} is not float or ue8m0")
    block = declared.get("weight_block_size")
    if block is None:
        return Fp8Scheme(None)
    if scheme != "dynamic":  # as vLLM: block scales come with per-group activation scales computed at run time
        raise UnsupportedQuantization(f"{ROOT}.activation_scheme", "block-wise fp8 needs 'dynamic'")
    return Fp8Scheme(_block(block, f"{ROOT}.weight_block_size"))


def _compressed_tensors(declared: dict) -> Fp8Scheme:
    _known_fields(declared, CT_FIELDS)
    for name in ("kv_cache_scheme", "sparsity_config", "transform_config"):
        if declared.get(name):
            raise UnsupportedQuantization(f"{ROOT}.{name}", "not honoured (the engine reads fp8 weights only)")
    if (status := declared.get("quantization_status", "compressed")) not in ("compressed", "frozen"):
        raise UnsupportedQuantization(f"{ROOT}.quantization_status", f"{status!r}: the weights are not quantized")
    groups = declared.get("config_groups") or {}
    if not groups:
        raise UnsupportedQuantization(f"{ROOT}.config_groups", "no quantization group")
    blocks = set()
    for name, group in groups.items():
        path = f"{ROOT}.config_groups.{name}"
        if (fmt := group.get("format") or declared.get("format")) != "float-quantized":
            raise UnsupportedQuantization(f"{path}.format", f"{fmt!r}: only float-quantized (fp8) weights are read")
        weights = group.get("weights") or {}
        if weights.get("type") != "float" or weights.get("num_bits") != 8 or not weights.get("symmetric", True):
            raise UnsupportedQuantization(f"{path}.weights", "only symmetric 8-bit float (e4m3) weights are read")
        strategy = weights.get("strategy")
        if strategy not in ("tensor", "channel", "block"):
            raise UnsupportedQuantization(f"{path}.weights.strategy", f"{strategy!r} is not tensor, channel or block")
        blocks.add(_block(weights.get("block_structure"), f"{path}.weights.block_structure") if strategy == "block"
                   else None)  # fmt: skip
        acts = group.get("input_activations")
        if acts and (acts.get("type") != "float" or acts.get("num_bits") != 8):
            raise UnsupportedQuantization(f"{path}.input_activations", "only fp8 activations (or none) are read")
    if len(blocks) > 1:
        raise UnsupportedQuantization(f"{ROOT}.config_groups", "groups with different scale layouts")
    return Fp8Scheme(blocks.pop())


def _known_fields(declared: dict, known: set[str]) -> None:
    if unknown := sorted(set(declared) - known):
        raise UnsupportedQuantization(f"{ROOT}.{unknown[0]}", "not a field the engine honours")


def _block(block, field: str) -> tuple[int, int]:
    if not (isinstance(block, list | tuple) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)):
        raise UnsupportedQuantization(field, f"{block!r} is not two positive sizes")
    return block[0], block[1]
