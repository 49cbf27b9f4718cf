#!/bin/bash
# issue 16, one device call (carry .whl and .whl16: pytest, pytest-asyncio wheels): the Triton prefill
# kernel's tests and micro-bench on the H200, then the prefill-heavy serving loads (8B 1,024/128 @64; 1B multi-turn).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl .whl16/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/generated PYTHONUNBUFFERED=1
F="leaked\|nanobind\|skipped remainder\|refleaks\|Loading weights"
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
