#!/bin/bash
# One device call from the repository root (carry .whl, as h200.sh): the gRPC accept burst with 1-8 server
# processes on one port, the CUDA-only tests (kernels, piecewise graphs, KV sizing, thinking budgets under CUDA
# graphs), and the Llama-8B shape at 128 / 128 @256 and 1,024 / 128 @64. Results in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/generated PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
quiet() { grep -v "leaked\|nanobind\|skipped remainder\|refleaks\|^ - "; }
for sc in "1 1" "1 4" "2 4" "4 4" "4 8" "8 8"; do set -- $sc
  timeout 60 python3 -m bench.serving.grpc_burst --bursts 32 --ticking 0,32 --servers $1 --channels $2 --rounds 10
done 2>&1 | quiet | tee "$OUT/h200_grpc_burst_servers.log"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_kv_sizing.py tests/engine/test_piecewise_graphs.py \
  tests/engine/test_triton_attention.py tests/engine/test_triton_linear.py tests/engine/test_triton_silu.py \
  tests/engine/test_triton_argmax.py tests/engine/test_packed_inputs.py tests/engine/test_thinking_budget.py 2>&1 \
  | quiet | tail -25 | tee "$OUT/h200_tests_12th.log"
timeout 250 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:128x128@256,random:1024x128@64 --prompts-per-stream 3 --client-processes 2 \
  --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/h200_serving_12th_8b.json" 2>&1 \
  | quiet | tee "$OUT/h200_serving_12th_8b.log"
