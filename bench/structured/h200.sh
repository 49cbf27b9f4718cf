#!/bin/bash
# bench/structured on one H200, in one device call (the image has torch and Triton; the rest travels):
#   .whl14: cp312 wheels of xgrammar 0.2.9, apache-tvm-ffi, pydantic, grpcio 1.85.1, protobuf 7, OpenTelemetry
#   .tok14: the default model's tokenizer (tokenizer.json, tokenizer_config.json), paired with the shapes' vocab
# Results land in $OUT: h200_gpu.txt, h200_<run>.log / .json.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl14/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/generated PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/h200_gpu.txt"
python3 -c 'import torch, triton, xgrammar; print(torch.__version__, triton.__version__)' >> "$OUT/h200_gpu.txt" 2>&1
# RUNS: ";"-separated "<shape>|<extra engine flags>" (the engine core runs in its own process on CUDA unless told).
RUNS=${RUNS:-"llama-1b|;llama-8b|"}
IFS=';' read -ra runs <<< "$RUNS"
for run in "${runs[@]}"; do
  shape=${run%%|*} extra=${run#*|} tag=$(echo "$run" | tr -c 'a-z0-9-' '_' | sed 's/_*$//')
  python3 -m bench.structured --device cuda --shape "$shape" --streams 64 --prompt-len 128 --new-tokens 128 \
    --rounds 2 --repeats 2 --tokenizer .tok14 --engine-flags "--max-model-len 2048 --max-num-seqs 64 --no-compile $extra" \
    --json "$OUT/h200_$tag.json" 2>&1 | grep -v -e leaked -e nanobind -e refleaks | tee "$OUT/h200_$tag.log"
done
