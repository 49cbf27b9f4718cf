# Issue 39's model families on the GPU (tests with CUDA present, random weights at real shapes); sourced by
# ../h200.sh.

# `_families_serve NAME SHAPE DATASETS [engine flags]`: one shape served, 3 prompts a stream, to $OUT/NAME.*.
_families_serve() {
  timeout 500 python3 -m bench.serving --device cuda --shape "$2" --caching on --dataset "$3" --prompts-per-stream 3 \
    --client-processes 4 --connections 2 --engine-flags "--max-model-len 2048 $4" --slo-ttft-ms 2000 \
    --slo-tpot-ms 100 --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
}

# The families' kernels and equivalence tests with CUDA present, then Qwen3-8B / 30B-A3B, Gemma 3 270M served.
# 1. the CUDA-only and interpreter-tested kernels on the GPU (fused MoE, attention) and every family's equivalence
#    test with CUDA present (tests/engine/test_families.py runs on CPU float32; the served half starts the real
#    engine on CUDA when it is there);
# 2. the random-weight families at their real shapes through bench/serving: Qwen3-8B (Triton attention, piecewise
#    graphs), Qwen3-30B-A3B (Triton fused MoE), Gemma 3 270M (SDPA: sliding windows), 128 / 128 and 1,024 / 128 at
#    1 / 64 / 256 streams, with the bench's roofline beside each.
families() {
  timeout 400 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_moe.py tests/engine/test_families.py \
    tests/engine/test_triton_attention.py tests/engine/test_piecewise_graphs.py 2>&1 | quiet | tail -25 \
    | tee "$OUT/families_tests.log"
  _families_serve qwen3_8b qwen3-8b random:128x128@1,random:128x128@64,random:128x128@256,random:1024x128@64
  _families_serve qwen3_30b_a3b qwen3-30b-a3b random:128x128@1,random:1024x128@64,random:1024x128@256
  _families_serve gemma3_270m gemma3-270m random:1024x128@1,random:1024x128@64
  _families_serve llama_8b_baseline llama-8b random:128x128@64,random:1024x128@64
}

# GLM-4.5's tests with CUDA present, then GLM-4.5-Air's first 12 layers served at 1,024 / 128 (an H100 80GB is enough).
# 1. the tiny GLM-4.5 against transformers with CUDA present (the served test runs the engine on CUDA: Triton
#    attention with the reordered partial-rotary heads, the fused MoE with grouped sigmoid routing and shared
#    experts, CUDA graphs), and against the SDPA backend with decode and piecewise graphs;
# 2. GLM-4.5-Air's first 12 layers (random weights, bf16, 54 GB) through bench/serving at 1,024 / 128, 1 / 64 / 256
#    streams, the roofline beside each (a mixture counted at its top-8 + 1 shared expert a token).
glm() {
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_families.py \
    tests/engine/test_triton_windowed_families.py tests/engine/test_triton_moe.py -k "glm4 or grouped or fused" 2>&1 \
    | quiet | tail -15 | tee "$OUT/glm_tests.log"
  timeout 500 python3 -m bench.serving --device cuda --shape glm-4.5-air-12l --caching on \
    --dataset random:1024x128@1,random:1024x128@64,random:1024x128@256 --prompts-per-stream 3 --client-processes 4 \
    --connections 2 --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
    --json "$OUT/glm_air_12l.json" 2>&1 | quiet | tee "$OUT/glm_air_12l.log"
}

# DeepSeek V3's MLA: its tests with CUDA present, then Moonlight-16B-A3B served at 1,024 / 128 (an H100 80GB is enough).
# 1. the tiny DeepSeek V3 (tests/engine/families.py) against transformers with CUDA present (the served test runs
#    the engine on CUDA: Triton attention over MLA's expanded, zero-padded 32-wide heads, the fused MoE with grouped
#    sigmoid routing and shared experts, CUDA graphs), and the Triton kernels with decode and piecewise graphs
#    against the SDPA backend;
# 2. Moonlight-16B-A3B's shape (random weights, bf16, 32 GB; heads cached 256 wide) through bench/serving at
#    1,024 / 128, 1 / 64 streams.
deepseek() {
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_families.py \
    tests/engine/test_triton_windowed_families.py -k "deepseek" 2>&1 | quiet | tail -15 | tee "$OUT/deepseek_tests.log"
  timeout 500 python3 -m bench.serving --device cuda --shape moonlight-16b-a3b --caching on \
    --dataset random:1024x128@1,random:1024x128@64 --prompts-per-stream 3 --client-processes 4 \
    --connections 2 --engine-flags "--max-model-len 2048" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
    --json "$OUT/moonlight.json" 2>&1 | quiet | tee "$OUT/moonlight.log"
}

# The Triton attention kernels with sliding windows, soft-caps and sinks, then Gemma 3 270M on them against SDPA.
# 1. the kernels on the GPU in bf16 (tests/engine/test_triton_attention.py: each variant against the SDPA backend,
#    decode, split decode, prefill, chunked prefill, window wrap, 256-wide heads), and tiny Gemma 2 / 3, gpt-oss and
#    Mistral through the runner on them, eager and with decode and piecewise CUDA graphs
#    (tests/engine/test_triton_windowed_families.py), beside the piecewise graphs' own test;
# 2. Gemma 3 270M at its real shape (random weights: 15 layers of a 512-token window, 3 global, head_dim 256)
#    through bench/serving on the Triton kernels, with the bench's roofline, then the same 1,024 / 128 load at 64
#    streams on SDPA (`--attention sdpa`, the path before) on the same card for the A/B. The 4,096 / 128 load runs
#    contexts 8x the window, where the windowed layers read only their last 512 keys.
windowed_attention() {
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_attention.py \
    tests/engine/test_triton_windowed_families.py tests/engine/test_piecewise_graphs.py --durations=8 \
    2>&1 | quiet | tail -30 | tee "$OUT/windowed_tests.log"
  _windowed_serve gemma3_270m_triton 220 random:1024x128@1,random:1024x128@64,random:4096x128@16
  _windowed_serve gemma3_270m_sdpa 160 random:1024x128@64 "--attention sdpa"
}
_windowed_serve() {  # NAME TIMEOUT DATASETS [engine flags]
  timeout "$2" python3 -m bench.serving --device cuda --shape gemma3-270m --caching on --dataset "$3" \
    --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "--max-model-len 8192 $4" \
    --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
}

# Sliding-window layers' own KV pool: its kernels' tests, then Gemma 3 270M at 32k context, one pool against two.
# engine_svc/scheduling/window_pool.py, engine_svc/model/kv_groups.py:
# 1. the Triton kernels reading windowed tables with freed blocks (0 entries), through the real scheduler, against
#    the eager SDPA runner with one pool, with decode graphs, a 6-step decode loop and piecewise mixed-step graphs
#    (tests/engine/test_triton_window_pool.py), beside the windowed families' and graphs' earlier GPU tests;
# 2. Gemma 3 270M at its real shape (random weights: 15 layers of a 512-token window, 3 global) at 32,768 tokens of
#    context, 8,192 / 128 at 64 streams, the KV cache held to 3% of free memory (~4 GiB on an H200: one pool holds
#    ~28 such sequences, the windowed pool all 64): with the windowed pool, then `--disable-hybrid-kv-cache-manager`
#    (one pool, the layout before) on the same card, for the A/B of preemptions and throughput.
window_pool() {
  timeout 240 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_window_pool.py \
    tests/engine/test_triton_windowed_families.py tests/engine/test_window_pool.py tests/engine/test_piecewise_graphs.py \
    tests/engine/test_decode_graphs.py --durations=8 2>&1 | quiet | tail -30 | tee "$OUT/window_pool_tests.log"
  _window_pool_serve gemma3_270m_window_pool 240
  _window_pool_serve gemma3_270m_one_pool 240 "--disable-hybrid-kv-cache-manager"
}
_window_pool_serve() {  # NAME TIMEOUT [engine flags]
  timeout "$2" python3 -m bench.serving --device cuda --shape gemma3-270m --caching on --dataset random:8192x128@64 \
    --prompts-per-stream 2 --client-processes 4 --connections 2 \
    --engine-flags "--max-model-len 32768 --max-num-seqs 64 --kv-cache-memory-fraction 0.03 $3" \
    --slo-ttft-ms 5000 --slo-tpot-ms 200 --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
  grep -h "kv_blocks=\|preemptions" "$OUT/$1.log" | tail -3 || true
}

# Block-wise fp8 checkpoints (DeepSeek V3 / Kimi K2 / Qwen3-*-FP8): is a native block-scaled path worth it?
# Against today's (the checkpoint dequantized at load, each projection quantized again per row: fp8_load.py). First
# the Triton block-scaled kernel against the dequantized product on CUDA (`--check`) and the fp8 checkpoint tests
# (CPU models; they must pass on a GPU host too), then each projection of the Qwen3-8B and Qwen3-30B-A3B shapes
# (attention and dense MLP widths) at 1 to 8,192 tokens: bf16, ours (per-row fp8 + its quantization), the Triton and
# cuBLAS block-scaled GEMMs (alone and + the activations' 1x128 quantization), each with its error against float32
# over the checkpoint's values (bench/engine/block_fp8.py).
block_fp8() {
  timeout 120 python3 -m bench.engine.block_fp8 --check 2>&1 | quiet | tee "$OUT/block_fp8_check.log"
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8_checkpoints.py 2>&1 | quiet | tail -5 \
    | tee "$OUT/block_fp8_tests.log"
  local shape
  for shape in qwen3-8b qwen3-30b-a3b; do
    timeout 240 python3 -m bench.engine.block_fp8 --shape "$shape" --rows 1,16,256,2048,8192 2>&1 | quiet \
      | tee "$OUT/block_fp8_$shape.log"
  done
}

# gpt-oss-20b (random weights at the published shape, bf16): `gpt_oss [serve|responses]`, carry .whl .gpt-oss.
# Build on the dev machine first (the device reaches no registry), then carry both folders (~45 MiB together):
#   .venv/bin/python -m tests.models.gpt_oss .gpt-oss/gpt-oss-20b     # tokenizer, chat template, config.json
#   .venv/bin/pip download httptools==0.9.0 --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --no-deps -d .gpt-oss/wheels     # render's HTTP face imports it
# Each phase < 10 minutes; no argument runs both, tighter.
# serve: the engine alone through bench/serving, 128 / 128 and 1,024 / 128 at 1 and 64 streams, roofline beside.
# responses: render, engine, derender and the one-hop service as processes (no Envoy on the device), the pipeline's
# Responses gRPC route called plain, streamed and with a function tool (bench/serving/gpt_oss_responses.py): errors 0.
gpt_oss() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpt-oss/wheels/*.whl \
    || exit 1
  local phase=${1:-both} budget
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
}
