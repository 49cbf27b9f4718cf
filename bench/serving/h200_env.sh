# Sourced by the H200 device scripts, from the repository root (carry .whl): installs the carried cp312 wheels
# with pip --target, puts them and the checkout on PYTHONPATH, makes $OUT and defines `quiet` (drops Triton's and
# nanobind's exit noise and model-loading chatter from a log).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/generated PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
quiet() { grep -v "leaked\|nanobind\|skipped remainder\|refleaks\|^ - \|Loading weights\|UserWarning\|_warn_once"; }
# The 8B fp8 128 / 128 @256 load of the 18th and 19th sessions, each to $OUT/NAME.log (and .json): `trace_8b_128 NAME
# [step_trace flags]` runs the step loop in process (5 rounds), `served_8b_128 NAME` the load served through gRPC.
f8="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448 --kv-cache-dtype fp8"
trace_8b_128() {
  timeout 150 python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 5 \
    --prompt-len 128 --new-tokens 128 --configs "$f8" "${@:2}" 2>&1 | quiet | tee "$OUT/$1.log"
}
served_8b_128() {
  timeout 240 python3 -m bench.serving --device cuda --shape llama-8b --caching on --dataset random:128x128@256 \
    --prompts-per-stream 3 --client-processes 4 --connections 2 --engine-flags "$f8 --api-servers 4" \
    --slo-ttft-ms 2000 --slo-tpot-ms 100 --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
}
# `multiturn_1b NAME SERVERS GENERATORS CONNECTIONS`: the 1B multi-turn set (64 four-turn conversations behind one
# shared 1,000-token system prompt, 32 streams), caching on then off in the same run, through SERVERS API servers
# and GENERATORS load generators of CONNECTIONS connections each, to $OUT/NAME.log and .json.
multiturn_1b() {
  timeout 280 python3 -m bench.serving --shape llama-1b --device cuda --caching on,off --dataset multiturn@32 \
    --conversations 64 --turns 4 --system-len 1000 --user-len 64 --turn-output-len 64 --client-processes "$3" \
    --connections "$4" --engine-flags "--max-model-len 2048 --api-servers $2" --slo-ttft-ms 500 --slo-tpot-ms 50 \
    --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
}
