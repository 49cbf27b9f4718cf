#!/bin/bash
# Block-wise fp8 checkpoints (DeepSeek V3 / Kimi K2 / Qwen3-*-FP8) on one GPU (carry .whl, as h200.sh), results in
# $OUT: is a native block-scaled path worth it against today's (the checkpoint dequantized at load, each projection
# quantized again per row: fp8_load.py)? First the Triton block-scaled kernel against the dequantized product on
# CUDA (`--check`) and the fp8 checkpoint tests (CPU models; they must pass on a GPU host too), then each
# projection of the Qwen3-8B and Qwen3-30B-A3B shapes (attention and dense MLP widths) at 1 to 8,192 tokens: bf16,
# ours (per-row fp8 + its quantization), the Triton and cuBLAS block-scaled GEMMs (alone and + the activations'
# 1x128 quantization), each with its error against float32 over the checkpoint's values (bench/engine/block_fp8.py).
source bench/serving/h200_env.sh
timeout 120 python3 -m bench.engine.block_fp8 --check 2>&1 | quiet | tee "$OUT/block_fp8_check.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8_checkpoints.py 2>&1 | quiet | tail -5 \
  | tee "$OUT/block_fp8_tests.log"
for shape in qwen3-8b qwen3-30b-a3b; do
  timeout 240 python3 -m bench.engine.block_fp8 --shape "$shape" --rows 1,16,256,2048,8192 2>&1 | quiet \
    | tee "$OUT/block_fp8_$shape.log"
done
