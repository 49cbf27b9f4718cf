# Sourced by the H200 device scripts, from the repository root (carry .whl): installs the carried cp312 wheels
# with pip --target, puts them and the checkout on PYTHONPATH, makes $OUT and defines `quiet` (drops Triton's and
# nanobind's exit noise and model-loading chatter from a log).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/generated PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
quiet() { grep -v "leaked\|nanobind\|skipped remainder\|refleaks\|^ - \|Loading weights\|UserWarning\|_warn_once"; }
