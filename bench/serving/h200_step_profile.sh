#!/bin/bash
# issue 16, 19th session (carry .whl): where a step's time goes under the closed loop. The GPU's clocks, power and
# throttle reasons sampled throughout; gate_up and down at 256 rows through 256-row tiles against cuBLAS (the call
# that produced results/h200_fp8_gemm_256rows_stream_k_8b.log also swept a stream-K product, slower and removed);
# the 8B fp8 128 / 128 @256 step loop in process with torch.profiler over 3 mixed calls and 3 decode runs, the first
# of each kept as a Chrome trace. Results in $OUT.
source bench/serving/h200_env.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 250 > "$OUT/h200_clocks_19.csv" &
smi=$!
timeout 240 python3 -m bench.engine.fp8_gemm_triton --shape llama-8b --rows 256 --matmuls gate_up,down --block-m 256 \
  2>&1 | quiet | tee "$OUT/h200_fp8_gemm_256rows_8b.log"
echo "sweep: ${SECONDS} s ($(date +%T))"
trace_8b_128 h200_trace_profile_19 --profile 3 --trace-dir "$OUT"
echo "trace: ${SECONDS} s ($(date +%T))"
kill $smi
gzip "$OUT"/*.json
