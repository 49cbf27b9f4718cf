# Issue 41's prefill / decode disaggregation on one GPU; sourced by ../h200.sh.

# P/D on one GPU: the CUDA IPC handoff's test, then the 8B shape's transfers and TTFT / TPOT, P/D against decode alone.
# First the device path's test (two tiny engine processes, the handoff by CUDA IPC, greedy tokens as the engine
# alone), then the bench: two engine processes of the 8B shape (random weights, --engine-core thread: the KV step
# needs the cache in the server's process), each --transfer-tokens prompt pulled by the gRPC stream and by CUDA IPC
# beside the device -> host -> device copy bound, and TTFT / TPOT of 16 requests of 1,000 + 128 tokens at once, P/D
# against the decode engine alone, with the transport the decode engine used. Results in $OUT/h200_pd.json and
# .log, the engines' logs in $OUT/pd_engines/ (bench/serving/README.md takes the numbers).
pd() {
  timeout 180 python3 -m pytest -q -p no:cacheprovider --durations=3 tests/engine/test_kv_ipc_cuda.py 2>&1 | quiet \
    | tee "$OUT/h200_pd_test.log"
  timeout 340 python3 -m bench.serving.pd --shape llama-8b --device cuda --kv-fraction 0.35 \
    --engine-flags "--max-model-len 20000" --transfer-tokens 1000 4000 16000 --prompt-tokens 1000 \
    --output-tokens 128 --requests 16 --log-dir "$OUT/pd_engines" --json "$OUT/h200_pd.json" 2>&1 | quiet | tee "$OUT/h200_pd.log"
  echo "total: ${SECONDS} s"
}
