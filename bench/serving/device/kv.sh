# The KV cache on the 8B fp8 load (issues 16 and 37): an e4m3 cache, KV events; sourced by ../h200.sh.

# An e4m3 KV cache (--kv-cache-dtype fp8): CUDA tests, attention over both caches, in process, served (17th).
# K/V widened to float16 after each load. CUDA tests of the attention kernels, fp8 and piecewise graphs; the decode
# and prefill attention over both caches at the 8B shape (default launches); the 8B fp8 128 / 128 @256 step loop in
# process with and without it; then served through gRPC with it.
kv_fp8() {
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_attention.py tests/engine/test_fp8.py \
    tests/engine/test_piecewise_graphs.py -k "not default_model" 2>&1 | grep -v Warning | tail -4 \
    | tee $OUT/h200_tests_kv_fp8.log
  timeout 90 python3 -m bench.engine.kernels --shape llama-8b --parts attention,prefill --attention-rows 64,256 \
    --attention-contexts 192,1152 --kv-cache-dtypes bf16,fp8 --no-sweep 2>&1 | quiet | tee $OUT/h200_attention_kv_fp8_8b.log
  echo "tests and kernels: ${SECONDS} s"
  local f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
  step_trace_8b_128 h200_trace_kv_fp8 150 "$f --kv-cache-dtype fp8;$f"
  echo "trace: ${SECONDS} s"
  served_8b h200_serving_kv_fp8_8b 240 random:128x128@256,random:1024x128@256 "$f --api-servers 4 --kv-cache-dtype fp8"
  echo "total: ${SECONDS} s"
}

# The 8B fp8 128 / 128 @256 load served over the bf16 cache, then the fp8 one, 4 API servers (17th).
# One call, 3 prompts a stream.
kv_fp8_ab() {
  local f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448 --api-servers 4" cache
  for cache in auto fp8; do
    timeout 200 python3 -m bench.serving --device cuda --shape llama-8b --caching on --dataset random:128x128@256 \
      --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "$f --kv-cache-dtype $cache" \
      --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/h200_serving_kv_${cache}_ab.json" 2>&1 | quiet \
      | grep -v "^$" | tee "$OUT/h200_serving_kv_${cache}_ab.log"
    echo "$cache: ${SECONDS} s"
  done
}

# The decode kernel widening V from fp8 with inline asm: CUDA tests, attention over both caches, in process (18th).
# Inline asm that Triton keeps in place (no byte-wise shared-memory reads). CUDA tests of the attention kernels;
# decode attention over both caches at the 8B shape (default launches), a launch sweep over the fp8 cache; the 8B
# fp8 128 / 128 @256 step loop in process with and without the fp8 cache.
kv_fp8_widen() {
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_triton_attention.py tests/engine/test_fp8.py \
    -k "not default_model" 2>&1 | grep -v Warning | tail -4 | tee $OUT/h200_tests_kv_fp8_widen.log
  timeout 60 python3 -m bench.engine.kernels --shape llama-8b --parts attention --attention-rows 64,256 \
    --attention-contexts 192,1152 --kv-cache-dtypes bf16,fp8 --no-sweep 2>&1 | quiet | tee $OUT/h200_attention_kv_fp8_widen.log
  timeout 150 python3 -m bench.engine.kernels --shape llama-8b --parts attention --attention-rows 256 \
    --attention-contexts 192 --kv-cache-dtypes fp8 --sweep 2>&1 | quiet | tee -a $OUT/h200_attention_kv_fp8_widen.log
  echo "tests and kernels: ${SECONDS} s"
  local f="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448"
  step_trace_8b_128 h200_trace_kv_fp8_widen 150 "$f --kv-cache-dtype fp8;$f"
  echo "total: ${SECONDS} s"
}

# What publishing KV events costs: the 8B fp8 128 / 128 @256 load served with events off / on / off (issue 37, 21st).
# Through gRPC (4 API servers): vLLM's ZMQ publisher with a replay buffer, one subscriber reading every frame; in
# one run, each variant compared with the first.
kv_events() {
  python3 - <<'PY' > "$OUT/h200_kv_events_subscriber.log" 2>&1 &
import time, zmq
sub = zmq.Context().socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.connect("tcp://127.0.0.1:5557")
frames = size = shown = 0
start = last = time.time()
while time.time() - start < 560:
    if sub.poll(1000):
        parts = sub.recv_multipart()
        frames += 1
        size += sum(map(len, parts))
    if frames != shown and time.time() - last >= 10:  # every 10 s while frames come
        last, shown = time.time(), frames
        print(f"{time.time() - start:.0f} s: {frames} frames, {size / 1e6:.2f} MB", flush=True)
PY
  local events="--kv-events-config '{\"enable_kv_cache_events\":true,\"endpoint\":\"tcp://*:5557\",\"replay_endpoint\":\"tcp://*:5558\"}'"
  timeout 560 python3 -m bench.serving --device cuda --shape llama-8b --caching on --dataset random:128x128@256 \
    --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "$f8 --api-servers 4" \
    --variant "events off=" --variant "events on=$events" --variant "events off again=" \
    --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/h200_kv_events.json" 2>&1 | quiet | tee "$OUT/h200_kv_events.log"
  tail -3 "$OUT/h200_kv_events_subscriber.log"
  echo "total: ${SECONDS} s"
}
