#!/bin/bash
# DeepSeek V3's MLA on the GPU (issue 39), one device call from the repository root (carry .whl, as h200.sh; an
# H100 80GB is enough), results in $OUT:
# 1. the tiny DeepSeek V3 (tests/engine/families.py) against transformers with CUDA present (the served test runs
#    the engine on CUDA: Triton attention over MLA's expanded, zero-padded 32-wide heads, the fused MoE with grouped
#    sigmoid routing and shared experts, CUDA graphs), and the Triton kernels with decode and piecewise graphs
#    against the SDPA backend;
# 2. Moonlight-16B-A3B's shape (random weights, bf16, 32 GB; heads cached 256 wide) through bench/serving at
#    1,024 / 128, 1 / 64 streams.
source bench/serving/h200_env.sh
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_families.py \
  tests/engine/test_triton_windowed_families.py -k "deepseek" 2>&1 | quiet | tail -15 | tee "$OUT/deepseek_tests.log"
timeout 500 python3 -m bench.serving --device cuda --shape moonlight-16b-a3b --caching on \
  --dataset random:1024x128@1,random:1024x128@64 --prompts-per-stream 3 --client-processes 4 \
  --connections 2 --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
  --json "$OUT/moonlight.json" 2>&1 | quiet | tee "$OUT/moonlight.log"
