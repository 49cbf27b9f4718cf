#!/bin/bash
# Issue 42's draft-model speculation check, one device call from the repository root (carry .whl, as h200.sh), results
# in $OUT: `bash bench/serving/h200_spec_draft.sh [SHAPE] [DRAFT_LAYERS]` (default llama-8b 2; mistral-7b-w8 is the
# shape whose echo workload copies). Batch 1, bf16, in process (bench/engine/spec_decode.py): plain decoding, n-gram
# speculation and a draft model (the target's random weights cut to its first DRAFT_LAYERS layers, with its
# embeddings and head: a layer-skip draft written to /tmp/spec_draft first), k = 4 each; decode tok/s per workload
# (echo, random greedy, sampled at temperature 1), acceptance and tokens per verify from the engine's counters,
# each configuration against plain. Random weights: the draft's acceptance says little about a real pair's; its cost
# per verify (k draft steps) and the speed at the acceptance it gets are what this measures.
source bench/serving/h200_env.sh
SHAPE=${1:-llama-8b}
LAYERS=${2:-2}
NGRAM='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
DRAFT='{"method": "draft_model", "model": "@draft", "num_speculative_tokens": 4}'
BASE="--max-model-len 4096"
timeout 540 python3 -m bench.engine.spec_decode --device cuda --shape "$SHAPE" --input-len 512 --output-len 512 \
  --prompts 3 --draft-layers "$LAYERS" --draft-dir /tmp/spec_draft \
  --configs "$BASE;$BASE --speculative-config '$NGRAM';$BASE --speculative-config '$DRAFT'" 2>&1 | quiet \
  | tee "$OUT/spec_draft_${SHAPE}_${LAYERS}l.log"
