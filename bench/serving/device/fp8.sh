# Issue 16's Llama-8B fp8 projections (14th to 19th sessions): products, step loop, served; sourced by ../h200.sh.

# Where an 8B 128 / 128 @256 step spends its time: bf16 against fp8 matmuls, the step trace, a step's kernels.
# The in-process step trace of the load, and the kernels of a decode step (256 rows x 192 tokens) and of a mixed
# one (254 decodes + 2 prefills of 128).
probe_8b_128() {
  timeout 120 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 256,512,2304,8192 2>&1 | quiet | tee $OUT/h200_fp8_gemm_8b_first.log
  timeout 200 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 3 --prompt-len 128 \
    --new-tokens 128 --configs "--max-model-len 2048" --profile 3 2>&1 | quiet | tee $OUT/h200_trace_8b_128.log
  timeout 220 python3 -m bench.engine.step_kernels --shape llama-8b --decode 256x192 --mixed 254x192+2x128 2>&1 | quiet | grep -v "^  tile" | tee $OUT/h200_step_kernels_8b_256x192.log
}

# fp8 projections against bf16, matmul by matmul, then the 8B shape served with --quantization fp8 (3 loads).
# bench/engine/fp8_gemm.py, then the three 8B loads of the issue.
fp8() {
  timeout 100 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 1,256,512,2304,8192 2>&1 | quiet | tee $OUT/h200_fp8_gemm_8b.log
  served_8b h200_serving_fp8_8b 420 "$loads_8b" "--max-model-len 2048 --quantization fp8" "--client-processes 2"
}

# The fp8 tests and piecewise graphs on CUDA, then the 8B shape served with the quantization in the norms / SwiGLU.
fp8_fused() {
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py tests/engine/test_piecewise_graphs.py 2>&1 \
    | quiet | tail -25 | tee $OUT/h200_tests_fp8.log
  served_8b h200_serving_fp8_fused_8b 300 "$loads_8b" "--max-model-len 2048 --quantization fp8" "--client-processes 2"
}

# The fp8 quantizations as one Triton kernel each: CUDA tests, a decode / mixed step's kernels, served (14th).
# engine_svc/model/triton_fp8.py; the kernels of a Llama-8B fp8 decode step and mixed step, and the three 8B loads
# served with --quantization fp8 over 4 API servers.
fp8_kernels() {
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_fp8.py tests/engine/test_triton_silu.py \
    tests/engine/test_fp8.py -k "not default_model" 2>&1 | grep -v Warning | tail -25 | tee $OUT/h200_tests_triton_fp8.log
  timeout 150 python3 -m bench.engine.step_kernels --shape llama-8b --decode 256x192 --mixed 64x192+63x128 \
    --engine-flags "--max-model-len 2048 --quantization fp8" 2>&1 | quiet | grep -v "^  tile" | tee $OUT/h200_step_kernels_fp8_8b.log
  served_8b h200_serving_fp8_triton_8b 330 "$loads_8b" "--max-model-len 2048 --quantization fp8 --api-servers 4"
}

# The 8B fp8 128 / 128 @256 load in process at step budgets of 8,192 / 4,096 / 2,048 / 1,024 tokens (14th).
# bench.engine.step_trace classifies every step call: does spreading each wave's prefills over more, smaller steps
# beat four big prefill steps?
fp8_step_budget() {
  local flags="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens"
  step_trace_8b_128 h200_trace_fp8_step_budget 420 "$flags 8192;$flags 4096;$flags 2048;$flags 1024"
}

# fp8 products of few output tiles split over two streams: CUDA tests, the matmuls, 128 / 128 @256 served (14th).
# o_proj and down of the Llama-8B shape at 256 rows (64 tiles on 132 SMs) split their inner dimension
# (Fp8Linear.splits_inner); the matmuls alone with fast accumulation beside.
fp8_split() {
  timeout 60 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py -k "not default_model" 2>&1 \
    | grep -v Warning | tail -25 | tee $OUT/h200_tests_fp8_split.log
  timeout 40 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 1,256 2>&1 | quiet | tee $OUT/h200_fp8_gemm_split_8b.log
  served_8b_128 h200_serving_fp8_split_8b 110 "--max-model-len 2048 --quantization fp8 --api-servers 4"
}

# Where the 8B fp8 128 / 128 @256 wave still goes: attention launches, fast accumulation, the step loop (15th).
# The decode attention kernel's launches swept at 256 rows (tile, warps, stages, grid order, splits); the fp8
# products with and without cuBLAS's fast accumulation from decode to prefill sizes; the step loop in process with
# fast accumulation (FAST_ACCUM_ROWS) against the 14th session's 21,315 tok/s (h200_trace_fp8_step_budget.log, same
# command), also at a step budget of 8,448 tokens (a group of 64 fresh 128-token prompts and 192 decodes in one
# step, piecewise graphs to 16,384 tokens); then with torch.profiler over 3 mixed calls and 3 decode runs (wall
# against GPU kernel time, the host's top calls).
fp8_probe() {
  timeout 60 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py tests/engine/test_triton_attention.py \
    -k "not default_model" 2>&1 | grep -v Warning | tail -5 | tee $OUT/h200_tests_fast_accum.log
  timeout 100 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 64,256,1024,7168 2>&1 | quiet \
    | tee $OUT/h200_fp8_gemm_fast_8b.log
  echo "tests and matmuls: ${SECONDS} s"
  local flags="--max-model-len 2048 --quantization fp8"
  step_trace_8b_128 h200_trace_fp8_fast_accum 300 "$flags;$flags --max-num-batched-tokens 8448"
  echo "after the trace: ${SECONDS} s"
  timeout 100 python3 -m bench.engine.kernels --shape llama-8b --parts attention --attention-rows 256 \
    --attention-contexts 192 2>&1 | quiet | tee $OUT/h200_attention_sweep_8b.log
  timeout 200 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 2 --prompt-len 128 \
    --new-tokens 128 --profile 3 --configs "$flags" 2>&1 | quiet | tee $OUT/h200_trace_fp8_profile.log
}

# The fp8 tests, decode attention swept at 64 / 256 rows, the 3 loads served, fast accumulation, 8,448 budget (16th).
# The fp8 tests with room to finish (the 15th session's probe cut them at 60 s), the decode attention's launches
# over 192- and 1,152-token contexts (the next three launches printed beside the best), then the Llama-8B shape
# served through gRPC with fast accumulation and an 8,448-token step budget, the 14th session's command otherwise.
fp8_served16() {
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py tests/engine/test_triton_attention.py \
    -k "not default_model" 2>&1 | grep -v Warning | tail -5 | tee $OUT/h200_tests_fast_accum.log
  timeout 90 python3 -m bench.engine.kernels --shape llama-8b --parts attention --attention-rows 64,256 \
    --attention-contexts 192,1152 2>&1 | quiet | tee $OUT/h200_attention_sweep_8b.log
  echo "tests and sweep: ${SECONDS} s"
  served_8b h200_serving_fp8_fast_8b 330 "$loads_8b" \
    "--max-model-len 2048 --quantization fp8 --api-servers 4 --max-num-batched-tokens 8448"
  echo "total: ${SECONDS} s"
}

# Split fp8 products' halves added in the next residual add + RMSNorm: CUDA tests, in process, served (16th).
# The decode attention at the sweep's winning launch and split products' halves summed inside the norm
# (PartialSums). CUDA tests of the fp8 products, piecewise graphs and attention kernels; the step loop in process
# (5 rounds, 8,448-token budget: 23,225 tok/s before, results/h200_trace_fp8_fast_accum.log); the Llama-8B shape
# served (21,991 before, results/h200_serving_fp8_fast_8b.log).
fp8_folded() {
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py tests/engine/test_triton_attention.py \
    tests/engine/test_piecewise_graphs.py -k "not default_model" 2>&1 | grep -v Warning | tail -4 | tee $OUT/h200_tests_folded.log
  local flags="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
  step_trace_8b_128 h200_trace_fp8_folded 150 "$flags"
  echo "tests and trace: ${SECONDS} s"
  served_8b h200_serving_fp8_folded_8b 330 "$loads_8b" "$flags --api-servers 4"
  echo "total: ${SECONDS} s"
}

# The engine's host-side knobs on the 8B fp8 128 / 128 @256 load in process, then a step's kernels (16th).
# Decode steps a run (32, --decode-steps' most, or 16) and the admission window (5 or 1 ms); the kernels of a decode
# and a mixed step after the 16th session's changes (attention launch, split halves in the norm).
fp8_knobs() {
  local f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
  step_trace_8b_128 h200_trace_fp8_knobs 260 "$f;$f --decode-steps 16;$f --admission-window-ms 1"
  echo "trace: ${SECONDS} s"
  timeout 120 python3 -m bench.engine.step_kernels --shape llama-8b --decode 256x192 --mixed 192x192+64x128 \
    --engine-flags "$f" 2>&1 | quiet | grep -v "^  tile" | tee $OUT/h200_step_kernels_fp8_16th.log
  echo "total: ${SECONDS} s"
}

# A Triton fp8 product (TMA, wgmma) swept against cuBLAS at 256 rows, then 128 / 128 @256 served (18th).
# The 8B shape's projections; served through gRPC over the fp8 cache (V widened in place).
gemm_served() {
  timeout 330 python3 -m bench.engine.fp8_gemm_triton --shape llama-8b --rows 256 2>&1 | quiet \
    | tee $OUT/h200_fp8_gemm_triton_8b.log
  echo "gemm: ${SECONDS} s"
  local f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
  served_8b_128 h200_serving_kv_fp8_widen 200 "$f --api-servers 4 --kv-cache-dtype fp8"
  echo "total: ${SECONDS} s"
}

# o_proj and down at decode sizes through the Triton split fp8 product: tests, products, in process, served (18th).
# triton_fp8_mm.py instead of cuBLAS over two streams. The fp8 CUDA tests; the engine's projections at 1, 64 and 256
# rows; the 8B fp8 128 / 128 @256 step loop in process (fp8 cache); then served through gRPC.
fp8_split_mm() {
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py -k "not default_model" 2>&1 | grep -v Warning | tail -4 \
    | tee $OUT/h200_tests_split_mm.log
  timeout 60 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 1,64,256 2>&1 | quiet | tee $OUT/h200_fp8_gemm_split_mm_8b.log
  echo "tests and products: ${SECONDS} s"
  trace_8b_128 h200_trace_split_mm
  echo "trace: ${SECONDS} s"
  served_8b_128 h200_serving_split_mm_8b
  echo "total: ${SECONDS} s"
}

# One decode graph per large batch bucket captured before serving: CUDA tests, in process, served (19th).
# The widest block table (the Triton decode's work follows each row's own length), where the 18th session's runs
# captured the (256 rows, width 16 / 32) graphs in the middle of the measured load; served as the 18th session's
# command. Then once more on the warm machine: served_8b_128 h200_serving_decode_graphs_8b_run2;
# trace_8b_128 h200_trace_decode_graphs_run2.
decode_graphs() {
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_decode_graphs.py tests/engine/test_piecewise_graphs.py \
    tests/engine/test_fp8.py -k "not default_model" 2>&1 | grep -v Warning | tail -4 | tee $OUT/h200_tests_decode_graphs.log
  echo "tests: ${SECONDS} s"
  trace_8b_128 h200_trace_decode_graphs
  echo "trace: ${SECONDS} s"
  served_8b_128 h200_serving_decode_graphs_8b
  echo "total: ${SECONDS} s"
}

# Where a step's time goes under the closed loop: clocks sampled, 256-row fp8 tiles, the profiled step loop (19th).
# The GPU's clocks, power and throttle reasons sampled throughout; gate_up and down at 256 rows through 256-row
# tiles against cuBLAS (the call that produced results/h200_fp8_gemm_256rows_stream_k_8b.log also swept a
# stream-K product, slower and removed); the 8B fp8 128 / 128 @256 step loop in process with torch.profiler over 3
# mixed calls and 3 decode runs, the first of each kept as a Chrome trace.
step_profile() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 250 > "$OUT/h200_clocks_19.csv" &
  local smi=$!
  timeout 240 python3 -m bench.engine.fp8_gemm_triton --shape llama-8b --rows 256 --matmuls gate_up,down --block-m 256 \
    2>&1 | quiet | tee "$OUT/h200_fp8_gemm_256rows_8b.log"
  echo "sweep: ${SECONDS} s ($(date +%T))"
  trace_8b_128 h200_trace_profile_19 --profile 3 --trace-dir "$OUT"
  echo "trace: ${SECONDS} s ($(date +%T))"
  kill $smi
  gzip "$OUT"/*.json
}
