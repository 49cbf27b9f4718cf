#!/bin/bash
# bench/serving's GPU runs (H200 or H100), one device call each, from the repository root (carry .whl: the
# grpcio/protobuf/OpenTelemetry cp312 wheels, see bench/engine/README.md; a configuration's comment names more):
#   bash bench/serving/h200.sh NAME [ARGS...]   runs configuration NAME, results in $OUT (default /tmp/out)
#   bash bench/serving/h200.sh list             the names with their one-line descriptions
# A configuration is a shell function in bench/serving/device/*.sh; its leading comment describes it, the first
# line in `list`. Each keeps the recorded commands of its measurements (bench/serving/README.md cites them), so a
# new measurement gets a new configuration rather than an edit of one whose numbers are published.
device_dir=$(dirname "${BASH_SOURCE[0]}")/device

# Drops Triton's and nanobind's exit noise and model-loading chatter from a log.
quiet() { grep -v "leaked\|nanobind\|skipped remainder\|refleaks\|^ - \|Loading weights\|UserWarning\|_warn_once"; }

# The Llama-8B shape served through gRPC, 3 prompts a stream, to $OUT/NAME.log and .json: `served_8b NAME TIMEOUT
# DATASETS ENGINE_FLAGS [CLIENT_FLAGS]` (4 load generators of 2 connections unless given); $loads_8b are issue 16's
# three 8B loads.
loads_8b=random:128x128@256,random:1024x128@64,random:1024x128@256
served_8b() {
  timeout "$2" python3 -m bench.serving --device cuda --shape llama-8b --caching on --dataset "$3" --prompts-per-stream 3 \
    ${5:---client-processes 4 --connections 2} --engine-flags "$4" --slo-ttft-ms 2000 --slo-tpot-ms 100 \
    --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
}
# The 8B fp8 128 / 128 @256 load of the 14th to 19th sessions, to $OUT/NAME.log (and .json): `trace_8b_128 NAME
# [step_trace flags]` runs the step loop in process (5 rounds) on $f8, `step_trace_8b_128 NAME TIMEOUT CONFIGS
# [flags]` on other engine configurations (step_trace's `;`-separated --configs), `served_8b_128 NAME [TIMEOUT
# [ENGINE FLAGS]]` the load served (240 s; $f8 through 4 API servers unless given).
f8="--max-model-len 2048 --quantization fp8 --max-num-batched-tokens 8448 --kv-cache-dtype fp8"
trace_8b_128() { step_trace_8b_128 "$1" 150 "$f8" "${@:2}"; }
step_trace_8b_128() {
  timeout "$2" python3 -m bench.engine.step_trace --device cuda --shape llama-8b --streams 256 --rounds 5 \
    --prompt-len 128 --new-tokens 128 --configs "$3" "${@:4}" 2>&1 | quiet | tee "$OUT/$1.log"
}
served_8b_128() { served_8b "$1" "${2:-240}" random:128x128@256 "${3:-$f8 --api-servers 4}"; }
# `multiturn_1b NAME SERVERS GENERATORS CONNECTIONS`: the 1B multi-turn set (64 four-turn conversations behind one
# shared 1,000-token system prompt, 32 streams), caching on then off in the same run, through SERVERS API servers
# and GENERATORS load generators of CONNECTIONS connections each, to $OUT/NAME.log and .json.
multiturn_1b() {
  timeout 280 python3 -m bench.serving --shape llama-1b --device cuda --caching on,off --dataset multiturn@32 \
    --conversations 64 --turns 4 --system-len 1000 --user-len 64 --turn-output-len 64 --client-processes "$3" \
    --connections "$4" --engine-flags "--max-model-len 2048 --api-servers $2" --slo-ttft-ms 500 --slo-tpot-ms 50 \
    --json "$OUT/$1.json" 2>&1 | quiet | tee "$OUT/$1.log"
}

# The configurations: every function of device/*.sh whose name does not start with `_`, first comment line beside.
configurations() {
  awk 'FNR == 1 { doc = "" } /^# / && doc == "" { doc = substr($0, 3) } !/^#/ && !/^[a-z0-9_]+\(\) *\{/ { doc = "" }
    /^[a-z0-9][a-z0-9_]*\(\) *\{/ { name = $0; sub(/\(.*/, "", name); printf "%-20s %s\n", name, doc; doc = "" }' "$device_dir"/*.sh
}
case "$1" in
list) configurations; exit 0 ;;
"" | -h | --help) { sed -n 2,5p "$0"; configurations; } >&2; exit 2 ;;
esac
if ! configurations | awk -v name="$1" '$1 == name { found = 1 } END { exit !found }'; then
  echo "unknown configuration: $1 (bash $0 list)" >&2; exit 2
fi
for src in "$device_dir"/*.sh; do source "$src"; done

# The carried cp312 wheels installed with pip --target, they and the checkout on PYTHONPATH.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/generated PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
"$@"
