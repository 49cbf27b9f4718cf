# Issue 16's Llama-3.1-8B / Llama-3.2-1B loads served through gRPC (bf16 unless named), sourced by ../h200.sh.

# Issue 16's 8B and 1B loads, caching on (and off for the 1B), to h200_serving_{8b,1b}.* (h200.sh's first runs).
# Llama-3.1-8B shape: 1,024 in / 128 out at 64 and 256 streams, 128 / 128 at 256 (random prompts: nothing to cache).
# Llama-3.2-1B shape, caching on then off in the same run: 1,024 / 256 at 256 streams, batch-1 decode (128 / 128),
# and 64 four-turn conversations behind one shared 1,000-token system prompt at 32 streams. Results in $OUT
# (h200_serving_*.log / .json); each run is bounded so the whole call ends within 10 minutes.
serving() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv > "$OUT/h200_gpu.txt"
  git rev-parse --short HEAD > "$OUT/h200_commit.txt" 2>/dev/null
  date -u
  timeout 230 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
    --dataset random:1024x128@64,random:1024x128@256,random:128x128@256 --prompts-per-stream 3 \
    --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
    --json "$OUT/h200_serving_8b.json" 2>&1 | grep -v "leaked\|nanobind\|skipped remainder\|refleaks" | tee "$OUT/h200_serving_8b.log"
  date -u
  timeout 260 python3 -m bench.serving --device cuda --shape llama-1b --caching on,off \
    --dataset random:1024x256@256,random:128x128@1,multiturn@32 --prompts-per-stream 3 \
    --conversations 64 --turns 4 --system-len 1000 --user-len 64 --turn-output-len 64 \
    --engine-flags "--max-model-len 2048" --slo-ttft-ms 500 --slo-tpot-ms 50 \
    --json "$OUT/h200_serving_1b.json" 2>&1 | grep -v "leaked\|nanobind\|skipped remainder\|refleaks" | tee "$OUT/h200_serving_1b.log"
  date -u
}

# Multi-turn TTFT and the prefill-heavy 1B load, caching on vs off in the same run (h200_multiturn.*).
# 64 four-turn conversations behind one shared 1,000-token system prompt at 32 streams, 1,024 / 256 at 256 streams
# and batch-1 128 / 128, two load-generator processes, with the engine's own view of TTFT.
# `--engine-flags "... --no-mixed-step-graphs"` gives the eager mixed steps to compare with.
multiturn() {
  date -u
  timeout 480 python3 -m bench.serving --shape llama-1b --device cuda --caching on,off \
    --dataset multiturn@32,random:1024x256@256,random:128x128@1 --conversations 64 --turns 4 --system-len 1000 \
    --user-len 64 --turn-output-len 64 --prompts-per-stream 3 --client-processes 2 \
    --engine-flags "--max-model-len 2048" --slo-ttft-ms 500 --slo-tpot-ms 50 --json "$OUT/h200_multiturn.json" 2>&1 \
    | grep -v "leaked\|nanobind\|skipped remainder\|refleaks" | tee "$OUT/h200_multiturn.log"
  date -u
}

# The Triton prefill kernel's tests and micro-bench, then the prefill-heavy loads (8B 1,024/128 @64; 1B multi-turn).
# Carry .whl16 too (pytest, pytest-asyncio wheels).
prefill() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl16/*.whl || exit 1
  local F="leaked\|nanobind\|skipped remainder\|refleaks\|Loading weights"
  date -u
  timeout 120 python3 -m pytest tests/engine/test_triton_attention.py -q -x -p no:cacheprovider -o addopts="" 2>&1 | tail -25 | tee "$OUT/prefill_tests.log"
  grep -q " passed" "$OUT/prefill_tests.log" && ! grep -q "failed\|error" "$OUT/prefill_tests.log" || exit 3
  date -u
  timeout 70 python3 -m bench.engine.kernels --shape llama-8b --parts prefill 2>&1 | grep -v "$F" | tail -40 | tee "$OUT/prefill_kernels_8b.log"
  date -u
  timeout 140 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
    --dataset random:1024x128@64 --prompts-per-stream 2 \
    --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
    --json "$OUT/h200_serving_8b.json" 2>&1 | grep -v "$F" | tee "$OUT/h200_serving_8b.log"
  date -u
  timeout 160 python3 -m bench.serving --device cuda --shape llama-1b --caching on,off \
    --dataset multiturn@32 --prompts-per-stream 2 \
    --conversations 64 --turns 4 --system-len 1000 --user-len 64 --turn-output-len 64 \
    --engine-flags "--max-model-len 2048" --slo-ttft-ms 500 --slo-tpot-ms 50 \
    --json "$OUT/h200_serving_1b.json" 2>&1 | grep -v "$F" | tee "$OUT/h200_serving_1b.log"
  date -u
}

# The step loop in process under the prefill-heavy loads per prefill budget (h200_trace_{8b,1b}.log).
# bench/engine/step_trace.py, one process per configuration (each holds its own KV cache).
trace() {
  local F="leaked\|nanobind\|skipped remainder\|refleaks\|Loading weights" budget
  for budget in 2048 8192; do
    timeout 120 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 64 --rounds 2 \
      --prompt-len 1024 --new-tokens 128 --configs "--max-model-len 2048 --max-num-batched-tokens $budget" \
      2>&1 | grep -v "$F" | tee -a "$OUT/h200_trace_8b.log"
    timeout 120 python3 -m bench.engine.step_trace --device cuda --shape llama-1b --streams 256 --rounds 2 \
      --prompt-len 1024 --new-tokens 256 --configs "--max-model-len 2048 --max-num-batched-tokens $budget" \
      2>&1 | grep -v "$F" | tee -a "$OUT/h200_trace_1b.log"
  done
}

# The gRPC accept burst over 1-8 servers, the CUDA-only tests, the 8B shape at 128 / 128 @256 and 1,024 / 128 @64.
# The burst with 1-8 server processes on one port; the CUDA-only tests (kernels, piecewise graphs, KV sizing,
# thinking budgets under CUDA graphs) (12th session).
checks() {
  local sc
  for sc in "1 1" "1 4" "2 4" "4 4" "4 8" "8 8"; do set -- $sc
    timeout 60 python3 -m bench.serving.grpc_burst --bursts 32 --ticking 0,32 --servers $1 --channels $2 --rounds 10
  done 2>&1 | grep -v "leaked\|nanobind\|skipped remainder\|refleaks\|^ - " | tee "$OUT/h200_grpc_burst_servers.log"
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_kv_sizing.py tests/engine/test_piecewise_graphs.py \
    tests/engine/test_triton_attention.py tests/engine/test_triton_linear.py tests/engine/test_triton_silu.py \
    tests/engine/test_triton_argmax.py tests/engine/test_packed_inputs.py tests/engine/test_thinking_budget.py 2>&1 \
    | grep -v "leaked\|nanobind\|skipped remainder\|refleaks\|^ - " | tail -25 | tee "$OUT/h200_tests_12th.log"
  timeout 250 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
    --dataset random:128x128@256,random:1024x128@64 --prompts-per-stream 3 --client-processes 2 \
    --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/h200_serving_12th_8b.json" 2>&1 \
    | grep -v "leaked\|nanobind\|skipped remainder\|refleaks\|^ - " | tee "$OUT/h200_serving_12th_8b.log"
}

# One API server against several over one engine core (--api-servers): multi-turn waves, 1B and 8B 128 / 128 @256.
# The multi-turn waves (caching on vs off, same run) and 1B 128 / 128 at 256 streams, load generators with several
# connections each (the kernel deals connections, not calls, to the servers). Ran as three device calls in the
# 12th session (the budget's shape).
api_servers() {
  local run s
  for run in "4 4 2" "1 4 2" "1 2 1" "4 2 2"; do
    set -- $run
    multiturn_1b "h200_multiturn_api_servers_$1_$2x$3" "$1" "$2" "$3"
  done
  for s in 4 1; do
    timeout 150 python3 -m bench.serving --shape llama-1b --device cuda --caching on --dataset random:128x128@256 \
      --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "--max-model-len 2048 --api-servers $s" \
      --json "$OUT/h200_1b_128_api_servers_$s.json" 2>&1 | quiet | tee "$OUT/h200_1b_128_api_servers_$s.log"
  done
  timeout 135 python3 -m bench.serving --shape llama-8b --device cuda --caching on --dataset random:128x128@256 \
    --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "--max-model-len 2048 --api-servers 4" \
    --warmup 1 --json "$OUT/h200_8b_128_api_servers_4.json" 2>&1 | quiet | tee "$OUT/h200_8b_128_api_servers_4.log"
}

# The 1B targets with every decode graph captured before serving, caching on then off (19th session).
# As the 16th session's best multi-turn run (one API server, two load generators of one connection): 64 four-turn
# conversations behind one shared 1,000-token system prompt at 32 streams, 1,024 / 256 at 256 streams and batch-1
# 128 / 128.
final_1b() {
  timeout 450 python3 -m bench.serving --shape llama-1b --device cuda --caching on,off \
    --dataset multiturn@32,random:1024x256@256,random:128x128@1 --conversations 64 --turns 4 --system-len 1000 \
    --user-len 64 --turn-output-len 64 --prompts-per-stream 3 --client-processes 2 --connections 1 \
    --engine-flags "--max-model-len 2048" --slo-ttft-ms 500 --slo-tpot-ms 50 --json "$OUT/h200_final_1b_19th.json" 2>&1 \
    | quiet | tee "$OUT/h200_final_1b_19th.log"
  echo "total: ${SECONDS} s"
}

# The 8B 1,024 / 128 targets at 64 and 256 streams, fp8 projections and cache through 4 API servers (19th session).
# As `h200.sh kv_fp8` served them in the 17th session.
final_8b_1024() {
  served_8b h200_final_8b_1024_19th 220 random:1024x128@64,random:1024x128@256 "$f8 --api-servers 4"
  echo "total: ${SECONDS} s"
}

# The 1B multi-turn set through 4 API servers and 4 generators of 2 connections, then 1 and 2 x 1 (19th session).
# 64 four-turn conversations behind one shared 1,000-token system prompt, 32 streams, caching on then off in the
# same run; the 1B message rate, ~17k streamed messages/s, saturates one API server's Python; the second as
# `h200.sh final_1b`'s.
multiturn_19() {
  multiturn_1b h200_multiturn_19th_4_4x2 4 4 2
  echo "first: ${SECONDS} s"
  multiturn_1b h200_multiturn_19th_1_2x1 1 2 1
  echo "total: ${SECONDS} s"
}
