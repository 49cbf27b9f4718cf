#!/bin/bash
# issue 37, 21st session (carry .whl): what publishing KV events costs, the 8B fp8 128 / 128 @256 load served
# through gRPC (4 API servers): events off / on (vLLM's ZMQ publisher with a replay buffer, one subscriber
# reading every frame) / off again, in one run, each variant compared with the first. Results in $OUT.
source bench/serving/h200_env.sh
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
events="--kv-events-config '{\"enable_kv_cache_events\":true,\"endpoint\":\"tcp://*:5557\",\"replay_endpoint\":\"tcp://*:5558\"}'"
timeout 560 python3 -m bench.serving --device cuda --shape llama-8b --caching on --dataset random:128x128@256 \
  --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "$f8 --api-servers 4" \
  --variant "events off=" --variant "events on=$events" --variant "events off again=" \
  --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/h200_kv_events.json" 2>&1 | quiet | tee "$OUT/h200_kv_events.log"
tail -3 "$OUT/h200_kv_events_subscriber.log"
echo "total: ${SECONDS} s"
