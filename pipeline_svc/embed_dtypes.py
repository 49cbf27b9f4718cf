"""vLLM's `embed_dtype` for base64 embeddings: each vector's bytes as float32, float16, bfloat16, fp8_e4m3 or
fp8_e5m2, in the request's byte order (vLLM's `endianness`; one-byte types have none), as vLLM's
`tensor.to(dtype)` makes them: round to nearest, ties to even. Computed with numpy (this service has no torch):
bfloat16 is float32's top half rounded; the fp8 types are quantized from float64 by their exponent and mantissa
widths. Past the largest value e4m3 ("fn": no infinities) saturates to it, as torch's conversion does, and e5m2
is infinite.
"""

from __future__ import annotations

import numpy as np

EMBED_DTYPES = ("float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2")
# fp8 layouts: (mantissa bits, exponent bias, largest finite value, byte for an overflow, NaN byte)
_FP8 = {"fp8_e4m3": (3, 7, 448.0, 0x7E, 0x7F), "fp8_e5m2": (2, 15, 57344.0, 0x7C, 0x7F)}


def vector_bytes(values, embed_dtype: str, byte_order: str) -> bytes:
    """The vector's bytes; `byte_order` "<" or ">"."""
    floats = np.asarray(values, dtype=np.float32)
    if embed_dtype == "float32":
        return floats.astype(f"{byte_order}f4").tobytes()
    if embed_dtype == "float16":
        with np.errstate(over="ignore"):  # past float16's range: infinity, as torch makes it
            return floats.astype(f"{byte_order}f2").tobytes()
    if embed_dtype == "bfloat16":
        return _bfloat16(floats).astype(f"{byte_order}u2").tobytes()
    return _fp8(floats.astype(np.float64), *_FP8[embed_dtype]).tobytes()


def _bfloat16(floats: np.ndarray) -> np.ndarray:
    bits = floats.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(np.isnan(floats), 0x7FC0, rounded & 0xFFFF).astype(np.uint16)  # a NaN: the quiet one


def _fp8(x: np.ndarray, mantissa: int, bias: int, largest: float, overflow: int, nan: int) -> np.ndarray:
    sign = np.signbit(x).astype(np.uint8) << 7
    size = np.where(np.isfinite(x), np.abs(x), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = np.maximum(np.floor(np.log2(np.where(size > 0, size, 1.0))), 1 - bias)  # subnormals share 1-bias
        step = np.exp2(exponent - mantissa)
        q = np.round(size / step) * step  # numpy rounds ties to even
    exponent = np.maximum(np.floor(np.log2(np.where(q > 0, q, 1.0))), 1 - bias)  # a carry may reach the next binade
    normal = q >= 2.0 ** (1 - bias)
    field = np.where(normal, exponent + bias, 0)
    fraction = np.where(normal, q / np.exp2(exponent) - 1, q / 2.0 ** (1 - bias)) * (1 << mantissa)
    code = (field.astype(np.int64) << mantissa) | np.round(fraction).astype(np.int64)
    code = np.where((q > largest) | np.isinf(x), overflow, code)
    code = np.where(np.isnan(x), nan, code)
    return (code.astype(np.uint8) | sign).astype(np.uint8)
