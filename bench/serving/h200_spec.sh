#!/bin/bash
# Issue 42's speculative decoding check, one device call from the repository root (carry .whl, as h200.sh), results
# in $OUT. Batch 1, Llama-3.1-8B shape (random weights), bf16, n-gram speculation (vLLM's --speculative-config)
# against plain decoding:
# 1. in process (bench/engine/spec_decode.py), on llama-8b-copy (Llama-3.1-8B's shape whose next token is a fixed
#    permutation of the current one by a wide margin, bench/engine/shapes.py COPYING: an 8B's whole cost per step and a
#    text no rounding changes; llama-8b-w1's one-token window copied in float32 on CPU but diverged on the H100, where
#    a verify's 5-row products round otherwise than a decode's one row): `echo` is the repetitive workload (the prompt
#    holds the text the model writes: P + G + P after it wrote G for P), `random` a fresh random prompt (greedy),
#    `sampled` the same at temperature 1; acceptance and tokens per verify from the engine's counters; target: echo
#    >= 1.8x, random and sampled >= 1.0x (no draft matches: speculation switches itself off);
# 2. served through gRPC (bench/serving, one stream, --variant plain vs ngram): random 128 / 1,024 (a random-weight
#    model's greedy text falls into loops: repetitive once it does) and random 1,024 / 128; the engine's
#    vllm:spec_decode_* series on its metrics port say how much was accepted.
source bench/serving/h200_env.sh
SPEC='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
timeout 280 python3 -m bench.engine.spec_decode --device cuda --shape llama-8b-copy --input-len 512 --output-len 512 \
  --prompts 3 --configs "--max-model-len 4096;--max-model-len 4096 --speculative-config '$SPEC'" 2>&1 | quiet \
  | tee "$OUT/spec_in_process.log"
timeout 280 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
  --dataset random:128x1024@1,random:1024x128@1 --prompts-per-stream 3 --engine-flags "--max-model-len 4096" \
  --variant plain= --variant "ngram=--speculative-config '$SPEC'" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
  --json "$OUT/spec_served.json" 2>&1 | quiet | tee "$OUT/spec_served.log"
