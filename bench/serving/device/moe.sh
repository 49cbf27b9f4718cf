# Issue 39's mixtures of experts on one GPU: the fused experts' tiles, MXFP4, Qwen3-30B-A3B served; sourced by
# ../h200.sh.

# Qwen3-30B-A3B's experts: `moe tiles|decode|batch1|final|probe|lines|pdl|checks|serve [FLAGS] [SUFFIX]`.
# `moe tiles` sweeps the fused experts' tiles of Qwen3-30B-A3B and gpt-oss-20b (bench/engine/moe_tiles.py, one token
# count a process so each count's table entry is written as it is measured) and copies the tables the engine reads
# (engine_svc/model/moe_tiles/) to $OUT; `moe serve [FLAGS] [SUFFIX]` serves Qwen3-30B-A3B in bf16 (FLAGS
# "--quantization fp8" on an H100) at 1 / 64 / 256 streams, each with the bench's roofline beside it (DATASET, PPS:
# prompts a stream, SERVE_S: its timeout); `moe batch1` measures the one-token experts (tests, tiles, a batch-1
# step's kernels); `moe final` the tests, token-1 tiles and the serve loads in one call (DATASET=random:128x128@1 for
# the batch-1 line alone, as on an H100: bf16 leaves no room for the 256 streams' cache; there also
# SERVE_FLAGS="--max-num-batched-tokens 2048 --max-num-seqs 8", whose graphs fit); `moe probe [FLAGS] [SUFFIX]` the
# batch-1 kernels, a step's kernels and the @1 and @256 lines in one call (PROBE_S bounds it); `moe lines [FLAGS]
# [SUFFIX]` the @1 and @256 lines, @256 with 4 prompts a stream (PPS), and that on a 16k-token step budget; `moe pdl
# [FLAGS] [SUFFIX]` programmatic dependent launch on and off; `moe checks [FLAGS] [SUFFIX]` a session's CUDA tests and
# the batch-1 line.
moe() {
  local start gpu on shape tokens
  case "$1" in
  tiles)
    for shape in qwen3-30b-a3b gpt-oss-20b; do
      for tokens in 1 8 64 256 1024 4096 8192; do
        timeout 200 python3 -m bench.engine.moe_tiles --shape $shape --tokens $tokens --write \
          --json "$OUT/tiles_${shape}_$tokens.json" 2>&1 | quiet | grep -v "OutOfResources" | tail -4 | tee -a "$OUT/tiles.log"
      done
    done
    cp engine_svc/model/moe_tiles/*.json "$OUT/" ;;
  decode)  # the decode sizes' tiles timed from CUDA graphs (one process), then the serve loads on them
    timeout 240 python3 -m bench.engine.moe_tiles --shape qwen3-30b-a3b --grid small --tokens 1,8,32,64,128,256 \
      --write --json "$OUT/tiles_small.json" 2>&1 | quiet | grep -v "OutOfResources" | tee "$OUT/tiles_small.log"
    cp engine_svc/model/moe_tiles/*.json "$OUT/"
    moe serve "$2" "$3" ;;
  batch1)  # the one-token path (no sorting, gating in the down, one routing launch): the kernels' tests in bf16, the
    # token-1 tiles timed from CUDA graphs (written to the table), a batch-1 decode step's kernels
    timeout 120 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_moe.py tests/engine/test_triton_routing.py tests/engine/test_families.py \
      2>&1 | quiet | tail -5 | tee "$OUT/moe_tests.log"
    timeout 150 python3 -m bench.engine.moe_tiles --shape qwen3-30b-a3b --grid small --tokens 1 --write \
      --json "$OUT/tiles_1.json" 2>&1 | quiet | grep -v "OutOfResources" | tee "$OUT/tiles_1.log"
    cp engine_svc/model/moe_tiles/*.json "$OUT/"
    timeout 240 python3 -m bench.engine.step_kernels --shape qwen3-30b-a3b --decode 1x1152 --mixed 1x1152+1x128 \
      2>&1 | quiet | grep -v "tile .* warps" | tee "$OUT/step_kernels_batch1.log" ;;
  final)  # one call: the kernels' tests, token-1 tiles written, the serve loads on them (16k step budget), then a
    # batch-1 step's kernels in whatever time is left of the call's 10 minutes
    start=$SECONDS
    timeout 100 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_moe.py tests/engine/test_triton_routing.py \
      2>&1 | quiet | tail -5 | tee "$OUT/moe_tests.log"
    timeout 120 python3 -m bench.engine.moe_tiles --shape qwen3-30b-a3b --grid small --tokens 1 --write \
      --json "$OUT/tiles_1.json" 2>&1 | quiet | grep -v "OutOfResources" | tee "$OUT/tiles_1.log"
    tar -cf "$OUT/moe_tiles.tar" engine_svc/model/moe_tiles
    SERVE_S=300 moe serve "${SERVE_FLAGS:---max-num-batched-tokens 16384}" _16k
    timeout $((580 - SECONDS + start)) python3 -m bench.engine.step_kernels --shape qwen3-30b-a3b --decode 1x1152 \
      2>&1 | quiet | grep -v "tile .* warps" | tee "$OUT/step_kernels_batch1.log" ;;
  probe)  # both served lines and the batch-1 breakdown in one call: the experts' grouped GEMMs (Triton, torch's),
    # 128 / 128 @1 and 1,024 / 128 @256 served with FLAGS, a batch-1 step's wall time and kernels, then the decode
    # attention's launches at one row
    start=$SECONDS
    timeout 60 python3 -m bench.engine.grouped_mm --shape qwen3-30b-a3b 2>&1 | quiet | tee "$OUT/grouped_mm$3.log"
    DATASET=${DATASET:-random:128x128@1,random:1024x128@256} SERVE_S=${SERVE_S:-330} moe serve "$2" "$3"
    timeout 130 python3 -m bench.engine.step_kernels --shape qwen3-30b-a3b --decode 1x1152 --decode-only \
      2>&1 | quiet | grep -v "tile .* warps" | head -14 | tee "$OUT/step_kernels_batch1$3.log"
    timeout $((${PROBE_S:-590} - SECONDS + start)) python3 -m bench.engine.kernels --shape qwen3-30b-a3b --parts attention \
      --attention-rows 1 --attention-contexts 1152 2>&1 | quiet | tee "$OUT/attention_b1$3.log" ;;
  lines)  # issue 39's two H200 lines only: 128 / 128 @1 and 1,024 / 128 @256 served with FLAGS (2 prompts a stream),
    # then @256 with 4 prompts a stream (less of the run in the first wave's ramp and the last one's drain), then that
    # on a 16k-token step budget
    DATASET=random:128x128@1,random:1024x128@256 SERVE_S=235 moe serve "$2" "$3"
    DATASET=random:1024x128@256 PPS=4 SERVE_S=165 moe serve "$2" "${3}_4"
    DATASET=random:1024x128@256 PPS=4 SERVE_S=165 moe serve "$2 --max-num-batched-tokens 16384" "${3}_4_16k" ;;
  checks)  # an H100's check of a session's engine changes: the CUDA tests of LoRA, prompt scoring, pooling and the
    # Triton kernels, then 128 / 128 @1 served with FLAGS (the batch-1 line, against the 30th session's 296.2 tok/s)
    timeout 170 python3 -m pytest -q -p no:cacheprovider tests/engine/test_lora.py tests/engine/test_prompt_scoring.py \
      tests/engine/test_pooling.py tests/engine/test_triton_linear.py tests/engine/test_triton_moe.py \
      tests/engine/test_triton_attention.py 2>&1 | quiet | tail -8 | tee "$OUT/checks_tests$3.log"
    DATASET=random:128x128@1 SERVE_S=380 moe serve "$2" "$3" ;;
  pdl)  # programmatic dependent launch on and off (SCALEOUT_PDL): the kernels' tests with it on, a batch-1 step's
    # wall time and kernels each way, then served with it on: 128 / 128 @1 (and 1,024 / 128 @256 on an H200, whose
    # memory holds its cache beside bf16 weights; an H100 takes FLAGS), then the decode attention's launches at 1 row
    start=$SECONDS
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu"
    python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_linear.py tests/engine/test_triton_routing.py \
      tests/engine/test_triton_moe.py tests/engine/test_triton_attention.py tests/engine/test_triton_argmax.py 2>&1 | quiet | tail -5 | tee "$OUT/pdl_tests$3.log"
    for on in 1 0; do
      SCALEOUT_PDL=$on timeout 120 python3 -m bench.engine.step_kernels --shape qwen3-30b-a3b --decode 1x1152 --decode-only \
        2>&1 | quiet | grep -v "tile .* warps" | head -14 | tee "$OUT/step_kernels_pdl$on$3.log"
    done
    case "$gpu" in
    *H200*) DATASET=random:128x128@1,random:1024x128@256 SERVE_S=$((560 - SECONDS + start)) moe serve "" "_pdl1$3" ;;
    *) DATASET=random:128x128@1 SERVE_S=$((500 - SECONDS + start)) moe serve "$2" "_pdl1$3" ;;
    esac
    timeout $((${PROBE_S:-590} - SECONDS + start)) python3 -m bench.engine.kernels --shape qwen3-30b-a3b --parts attention \
      --attention-rows 1 --attention-contexts 1152 2>&1 | quiet | tee "$OUT/attention_b1$3.log" ;;
  serve)
    timeout ${SERVE_S:-560} python3 -m bench.serving --device cuda --shape qwen3-30b-a3b --caching on \
      --dataset ${DATASET:-random:128x128@1,random:1024x128@64,random:1024x128@256} --prompts-per-stream ${PPS:-2} --client-processes 4 \
      --connections 2 --engine-flags "--max-model-len 2048 --max-num-seqs 256 $2" \
      --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/qwen3_30b_a3b$3.json" 2>&1 | quiet | tee "$OUT/qwen3_30b_a3b$3.log" ;;
  *) echo "moe: tiles|decode|batch1|final|probe|lines|pdl|checks|serve [FLAGS] [SUFFIX]" >&2; return 2 ;;
  esac
}

# gpt-oss's MXFP4 experts: `mxfp4 [kernels] [--write]` their tests and a layer bf16 vs MXFP4; `mxfp4 serve` served.
# kernels: the kernels' tests on CUDA in bf16 (tests/engine/test_mxfp4.py: the grouped GEMM widening packed e2m1
# against the dequantized experts, an MXFP4 checkpoint served; test_triton_moe.py: bf16 and fp8 unchanged), then one
# gpt-oss-20b-shape MoE layer (32 experts, 4 a token, 2880 wide) timed bf16 vs MXFP4 at 1 and 64 tokens from CUDA
# graphs (bench/engine/moe_tiles.py: the default tiles and the best of the decode grid, GB/s against the copy
# bandwidth; `--write` keeps the best as the engine's mxfp4 table, copied to $OUT). serve: the gpt-oss-20b shape
# (random bf16 weights) served 128 / 128 at 1 and 64 streams, its experts bf16 then MXFP4 (--quantization mxfp4:
# quantized at load).
mxfp4() {
  local phase=${1:-kernels} quantization
  [ $# -gt 0 ] && shift
  case "$phase" in
  kernels)
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_mxfp4.py tests/engine/test_triton_moe.py \
      2>&1 | quiet | tail -5 | tee "$OUT/mxfp4_tests.log"
    timeout 400 python3 -m bench.engine.moe_tiles --shape gpt-oss-20b --formats bf16,mxfp4 --tokens 1,64 --grid small \
      --json "$OUT/mxfp4_layer.json" "$@" 2>&1 | quiet | grep -v "OutOfResources" | tee "$OUT/mxfp4_layer.log"
    cp engine_svc/model/moe_tiles/*.json "$OUT/" 2>/dev/null ;;
  serve)
    for quantization in none mxfp4; do
      timeout 280 python3 -m bench.serving --device cuda --shape gpt-oss-20b --caching on --prompts-per-stream 3 \
        --dataset random:128x128@1,random:128x128@64 --client-processes 4 --connections 2 \
        --engine-flags "--max-model-len 2048 --quantization $quantization" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
        --json "$OUT/gpt_oss_20b_$quantization.json" 2>&1 | quiet | tee "$OUT/gpt_oss_20b_$quantization.log"
    done ;;
  esac
}
