#!/bin/bash
# Issue 39's gpt-oss-20b check (random weights at the published shape, bf16), from the repository root, results in $OUT.
# Build on the dev machine first (the device reaches no registry), then carry both folders (~45 MiB together):
#   .venv/bin/python -m tests.models.gpt_oss .gpt-oss/gpt-oss-20b     # tokenizer, chat template, config.json
#   .venv/bin/pip download httptools==0.9.0 --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --no-deps -d .gpt-oss/wheels     # render's HTTP face imports it
#   run: bash bench/serving/h200_gpt_oss.sh [serve|responses]   carry: .whl .gpt-oss   (each phase < 10 minutes;
#   no argument runs both, tighter)
# serve: the engine alone through bench/serving, 128 / 128 and 1,024 / 128 at 1 and 64 streams, roofline beside.
# responses: render, engine, derender and the one-hop service as processes (no Envoy on the device), the pipeline's
# Responses gRPC route called plain, streamed and with a function tool (bench/serving/gpt_oss_responses.py): errors 0.
source bench/serving/h200_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpt-oss/wheels/*.whl \
  || exit 1
phase=${1:-both}
budget=$([ "$phase" = both ] && echo 280 || echo 560)
if [ "$phase" != responses ]; then
  timeout "$budget" python3 -m bench.serving --device cuda --shape gpt-oss-20b --caching on --prompts-per-stream 3 \
    --dataset random:128x128@1,random:128x128@64,random:1024x128@1,random:1024x128@64 --client-processes 4 \
    --connections 2 --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
    --json "$OUT/gpt_oss_20b.json" 2>&1 | quiet | tee "$OUT/gpt_oss_20b.log"
fi
if [ "$phase" != serve ]; then
  OUT="$OUT/responses" timeout "$budget" python3 -m bench.serving.gpt_oss_responses --folder .gpt-oss/gpt-oss-20b \
    --shape gpt-oss-20b --device cuda --rounds 3 --json "$OUT/gpt_oss_responses.json" 2>&1 | quiet \
    | tee "$OUT/gpt_oss_responses.log"
fi
