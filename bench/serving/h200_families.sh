#!/bin/bash
# Issue 39's GPU check, one device call from the repository root (carry .whl, as h200.sh), results in $OUT:
# 1. the CUDA-only and interpreter-tested kernels on the GPU (fused MoE, attention) and every family's
#    equivalence test with CUDA present (tests/engine/test_families.py runs on CPU float32; the served half
#    starts the real engine on CUDA when it is there);
# 2. the random-weight families at their real shapes through bench/serving: Qwen3-8B (Triton attention, piecewise
#    graphs), Qwen3-30B-A3B (Triton fused MoE), Gemma 3 270M (SDPA: sliding windows), 128 / 128 and 1,024 / 128 at
#    1 / 64 / 256 streams, with the bench's roofline beside each.
source bench/serving/h200_env.sh
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_moe.py tests/engine/test_families.py \
  tests/engine/test_triton_attention.py tests/engine/test_piecewise_graphs.py 2>&1 | quiet | tail -25 \
  | tee "$OUT/families_tests.log"
serve() {  # NAME SHAPE DATASETS [engine flags]
  timeout 500 python3 -m bench.serving --device cuda --shape "$2" --caching on --dataset "$3" --prompts-per-stream 3 \
    --client-processes 4 --connections 2 --engine-flags "--max-model-len 2048 $4" --slo-ttft-ms 2000 \
    --slo-tpot-ms 100 --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
}
serve qwen3_8b qwen3-8b random:128x128@1,random:128x128@64,random:128x128@256,random:1024x128@64
serve qwen3_30b_a3b qwen3-30b-a3b random:128x128@1,random:1024x128@64,random:1024x128@256
serve gemma3_270m gemma3-270m random:1024x128@1,random:1024x128@64
serve llama_8b_baseline llama-8b random:128x128@64,random:1024x128@64
