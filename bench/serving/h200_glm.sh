#!/bin/bash
# GLM-4.5 on the GPU (issue 39), one device call from the repository root (carry .whl, as h200.sh; an H100 80GB
# is enough), results in $OUT:
# 1. the tiny GLM-4.5 against transformers with CUDA present (the served test runs the engine on CUDA: Triton
#    attention with the reordered partial-rotary heads, the fused MoE with grouped sigmoid routing and shared
#    experts, CUDA graphs), and against the SDPA backend with decode and piecewise graphs;
# 2. GLM-4.5-Air's first 12 layers (random weights, bf16, 54 GB) through bench/serving at 1,024 / 128, 1 / 64 / 256
#    streams, the roofline beside each (a mixture counted at its top-8 + 1 shared expert a token).
source bench/serving/h200_env.sh
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_families.py \
  tests/engine/test_triton_windowed_families.py tests/engine/test_triton_moe.py -k "glm4 or grouped or fused" 2>&1 \
  | quiet | tail -15 | tee "$OUT/glm_tests.log"
timeout 500 python3 -m bench.serving --device cuda --shape glm-4.5-air-12l --caching on \
  --dataset random:1024x128@1,random:1024x128@64,random:1024x128@256 --prompts-per-stream 3 --client-processes 4 \
  --connections 2 --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
  --json "$OUT/glm_air_12l.json" 2>&1 | quiet | tee "$OUT/glm_air_12l.log"
