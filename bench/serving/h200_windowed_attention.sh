#!/bin/bash
# Issue 39, the Triton attention kernels with sliding windows, soft-caps and sinks: one device call from the
# repository root (carry .whl, as h200.sh), results in $OUT:
# 1. the kernels on the GPU in bf16 (tests/engine/test_triton_attention.py: each variant against the SDPA backend,
#    decode, split decode, prefill, chunked prefill, window wrap, 256-wide heads), and tiny Gemma 2 / 3, gpt-oss and
#    Mistral through the runner on them, eager and with decode and piecewise CUDA graphs
#    (tests/engine/test_triton_windowed_families.py), beside the piecewise graphs' own test;
# 2. Gemma 3 270M at its real shape (random weights: 15 layers of a 512-token window, 3 global, head_dim 256)
#    through bench/serving on the Triton kernels, with the bench's roofline, then the same 1,024 / 128 load at 64
#    streams on SDPA (`--attention sdpa`, the path before) on the same card for the A/B. The 4,096 / 128 load runs
#    contexts 8x the window, where the windowed layers read only their last 512 keys.
source bench/serving/h200_env.sh
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_attention.py \
  tests/engine/test_triton_windowed_families.py tests/engine/test_piecewise_graphs.py --durations=8 \
  2>&1 | quiet | tail -30 | tee "$OUT/windowed_tests.log"
serve() {  # NAME TIMEOUT DATASETS [engine flags]
  timeout "$2" python3 -m bench.serving --device cuda --shape gemma3-270m --caching on --dataset "$3" \
    --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "--max-model-len 8192 $4" \
    --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
}
serve gemma3_270m_triton 220 random:1024x128@1,random:1024x128@64,random:4096x128@16
serve gemma3_270m_sdpa 160 random:1024x128@64 "--attention sdpa"
