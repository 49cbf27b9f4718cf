#!/bin/bash
# issue 16, 16th session, second device call (carry .whl): the decode attention at the sweep's winning launch and
# split fp8 products' halves added inside the next residual add + RMSNorm (PartialSums). CUDA tests of the fp8
# products, piecewise graphs and attention kernels; the step loop in process (5 rounds, 8,448-token budget: 23,225
# tok/s before, results/h200_trace_fp8_fast_accum.log); the Llama-8B shape served (21,991 before,
# results/h200_serving_fp8_fast_8b.log). Results in $OUT.
source bench/serving/h200_env.sh
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py tests/engine/test_triton_attention.py \
  tests/engine/test_piecewise_graphs.py -k "not default_model" 2>&1 | grep -v Warning | tail -4 | tee $OUT/h200_tests_folded.log
flags="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
timeout 150 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 5 --prompt-len 128 \
  --new-tokens 128 --configs "$flags" 2>&1 | quiet | tee $OUT/h200_trace_fp8_folded.log
echo "tests and trace: ${SECONDS} s"
timeout 330 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:128x128@256,random:1024x128@64,random:1024x128@256 --prompts-per-stream 3 --client-processes 4 \
  --connections 2 --engine-flags "$flags --api-servers 4" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
  --json "$OUT/h200_serving_fp8_folded_8b.json" 2>&1 | quiet | tee "$OUT/h200_serving_fp8_folded_8b.log"
echo "total: ${SECONDS} s"
