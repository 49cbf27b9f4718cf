# Issue 40's weight updates from a trainer (RL); sourced by ../h200.sh.

# The NCCL rendezvous test, then the 8B shape updated from a colocated trainer over CUDA IPC (carry .peer too).
# vLLM 0.33's packed_tensor.py at .peer/packed_tensor.py, which needs only torch. The test:
# tests/engine/test_trainer_group_cuda.py, vLLM's trainer wire against the engine's side (with one GPU NCCL refuses
# two ranks on it and the two-rank test skips, saying so); the update: one handle a tensor and then packed by vLLM's
# own packed_ipc_producer (1 GiB buffers), each with 256 streams frozen in keep mode, and decode before sleep and
# after wake-up.
rl() {
  timeout 150 python3 -m pytest -q -rs -p no:cacheprovider tests/engine/test_trainer_group_cuda.py 2>&1 | quiet \
    | tee "$OUT/rl_nccl_test.log"
  timeout 200 python3 -m bench.engine.rl_ipc --shape llama-8b --streams 256 --out "$OUT/rl_ipc_8b.json" 2>&1 | quiet \
    | tee "$OUT/rl_ipc_8b.log"
  timeout 200 python3 -m bench.engine.rl_ipc --shape llama-8b --streams 256 --vllm-packer .peer/packed_tensor.py \
    --out "$OUT/rl_ipc_8b_packed.json" 2>&1 | quiet | tee "$OUT/rl_ipc_8b_packed.log"
  echo "total: ${SECONDS} s"
}
