#!/bin/bash
# Issue 39's MXFP4 experts (gpt-oss's checkpoints' format) on one GPU (carry .whl, as h200.sh), results in $OUT.
# `bash bench/serving/h200_mxfp4.sh [kernels] [--write]`: the kernels' tests on CUDA in bf16 (tests/engine/
# test_mxfp4.py: the grouped GEMM widening packed e2m1 against the dequantized experts, an MXFP4 checkpoint served;
# test_triton_moe.py: bf16 and fp8 unchanged), then one gpt-oss-20b-shape MoE layer (32 experts, 4 a token, 2880
# wide) timed bf16 vs MXFP4 at 1 and 64 tokens from CUDA graphs (bench/engine/moe_tiles.py: the default tiles and
# the best of the decode grid, GB/s against the copy bandwidth; `--write` keeps the best as the engine's mxfp4 table,
# copied to $OUT). `... serve`: the gpt-oss-20b shape (random bf16 weights) served 128 / 128 at 1 and 64 streams,
# its experts bf16 then MXFP4 (--quantization mxfp4: quantized at load).
source bench/serving/h200_env.sh
phase=${1:-kernels}
[ $# -gt 0 ] && shift
case "$phase" in
kernels)
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_mxfp4.py tests/engine/test_triton_moe.py \
    2>&1 | quiet | tail -5 | tee "$OUT/mxfp4_tests.log"
  timeout 400 python3 -m bench.engine.moe_tiles --shape gpt-oss-20b --formats bf16,mxfp4 --tokens 1,64 --grid small \
    --json "$OUT/mxfp4_layer.json" "$@" 2>&1 | quiet | grep -v "OutOfResources" | tee "$OUT/mxfp4_layer.log"
  cp engine_svc/model/moe_tiles/*.json "$OUT/" 2>/dev/null ;;
serve)
  for quantization in none mxfp4; do
    timeout 280 python3 -m bench.serving --device cuda --shape gpt-oss-20b --caching on --prompts-per-stream 3 \
      --dataset random:128x128@1,random:128x128@64 --client-processes 4 --connections 2 \
      --engine-flags "--max-model-len 2048 --quantization $quantization" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
      --json "$OUT/gpt_oss_20b_$quantization.json" 2>&1 | quiet | tee "$OUT/gpt_oss_20b_$quantization.log"
  done ;;
esac
