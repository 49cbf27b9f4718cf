#!/bin/bash
# Issue 39, sliding-window layers' own KV pool (engine_svc/scheduling/window_pool.py, engine_svc/model/kv_groups.py):
# one device call from the repository root (carry .whl, as h200.sh), results in $OUT:
# 1. the Triton kernels reading windowed tables with freed blocks (0 entries), through the real scheduler, against
#    the eager SDPA runner with one pool, with decode graphs, a 6-step decode loop and piecewise mixed-step graphs
#    (tests/engine/test_triton_window_pool.py), beside the windowed families' and graphs' earlier GPU tests;
# 2. Gemma 3 270M at its real shape (random weights: 15 layers of a 512-token window, 3 global) at 32,768 tokens of
#    context, 8,192 / 128 at 64 streams, the KV cache held to 3% of free memory (~4 GiB on an H200: one pool holds
#    ~28 such sequences, the windowed pool all 64): with the windowed pool, then `--disable-hybrid-kv-cache-manager`
#    (one pool, the layout before) on the same card, for the A/B of preemptions and throughput.
source bench/serving/h200_env.sh
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_window_pool.py \
  tests/engine/test_triton_windowed_families.py tests/engine/test_window_pool.py tests/engine/test_piecewise_graphs.py \
  tests/engine/test_decode_graphs.py --durations=8 2>&1 | quiet | tail -30 | tee "$OUT/window_pool_tests.log"
serve() {  # NAME TIMEOUT [engine flags]
  timeout "$2" python3 -m bench.serving --device cuda --shape gemma3-270m --caching on --dataset random:8192x128@64 \
    --prompts-per-stream 2 --client-processes 4 --connections 2 \
    --engine-flags "--max-model-len 32768 --max-num-seqs 64 --kv-cache-memory-fraction 0.03 $3" \
    --slo-ttft-ms 5000 --slo-tpot-ms 200 --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
  grep -h "kv_blocks=\|preemptions" "$OUT/$1.log" | tail -3 || true
}
serve gemma3_270m_window_pool 240
serve gemma3_270m_one_pool 240 "--disable-hybrid-kv-cache-manager"
