# Issue 42's speculative decoding at batch 1 (n-gram, draft model) against plain decoding; sourced by ../h200.sh.

# n-gram speculation against plain decoding, Llama-3.1-8B shape, bf16, batch 1: in process, then served.
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
spec() {
  local SPEC='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
  timeout 280 python3 -m bench.engine.spec_decode --device cuda --shape llama-8b-copy --input-len 512 --output-len 512 \
    --prompts 3 --configs "--max-model-len 4096;--max-model-len 4096 --speculative-config '$SPEC'" 2>&1 | quiet \
    | tee "$OUT/spec_in_process.log"
  timeout 280 python3 -m bench.serving --device cuda --shape llama-8b --caching on \
    --dataset random:128x1024@1,random:1024x128@1 --prompts-per-stream 3 --engine-flags "--max-model-len 4096" \
    --variant plain= --variant "ngram=--speculative-config '$SPEC'" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
    --json "$OUT/spec_served.json" 2>&1 | quiet | tee "$OUT/spec_served.log"
}

# Plain, n-gram and a layer-skip draft model at batch 1 in process: `spec_draft [SHAPE] [DRAFT_LAYERS]`.
# Default llama-8b 2; mistral-7b-w8 is the shape whose echo workload copies. bf16, bench/engine/spec_decode.py: the
# draft is the target's random weights cut to its first DRAFT_LAYERS layers, with its embeddings and head, written
# to /tmp/spec_draft first; k = 4 each; decode tok/s per workload (echo, random greedy, sampled at temperature 1),
# acceptance and tokens per verify from the engine's counters, each configuration against plain. Random weights:
# the draft's acceptance says little about a real pair's; its cost per verify (k draft steps) and the speed at the
# acceptance it gets are what this measures.
spec_draft() {
  local SHAPE=${1:-llama-8b} LAYERS=${2:-2}
  local NGRAM='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
  local DRAFT='{"method": "draft_model", "model": "@draft", "num_speculative_tokens": 4}'
  local BASE="--max-model-len 4096"
  timeout 540 python3 -m bench.engine.spec_decode --device cuda --shape "$SHAPE" --input-len 512 --output-len 512 \
    --prompts 3 --draft-layers "$LAYERS" --draft-dir /tmp/spec_draft \
    --configs "$BASE;$BASE --speculative-config '$NGRAM';$BASE --speculative-config '$DRAFT'" 2>&1 | quiet \
    | tee "$OUT/spec_draft_${SHAPE}_${LAYERS}l.log"
}
