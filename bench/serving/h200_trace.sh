#!/bin/bash
# issue 16, one device call (carry .whl): what the step loop does under the prefill-heavy loads, in process
# (bench/engine/step_trace.py), per prefill budget; one process per configuration (each holds its own KV cache).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/generated PYTHONUNBUFFERED=1
F="leaked\|nanobind\|skipped remainder\|refleaks\|Loading weights"
for budget in 2048 8192; do
  timeout 120 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 64 --rounds 2 \
    --prompt-len 1024 --new-tokens 128 --configs "--max-model-len 2048 --max-num-batched-tokens $budget" \
    2>&1 | grep -v "$F" | tee -a "$OUT/h200_trace_8b.log"
  timeout 120 python3 -m bench.engine.step_trace --device cuda --shape llama-1b --streams 256 --rounds 2 \
    --prompt-len 1024 --new-tokens 256 --configs "--max-model-len 2048 --max-num-batched-tokens $budget" \
    2>&1 | grep -v "$F" | tee -a "$OUT/h200_trace_1b.log"
done
