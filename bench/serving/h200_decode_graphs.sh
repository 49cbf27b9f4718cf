#!/bin/bash
# issue 16, 19th session (carry .whl): one decode graph per large batch bucket, captured before serving (the widest
# block table: the Triton decode's work follows each row's own length), where the 18th session's runs captured
# the (256 rows, width 16 / 32) graphs in the middle of the measured load. The CUDA tests; the 8B fp8 128 / 128 @256
# step loop in process; then served through gRPC, the 18th session's command. Results in $OUT.
source bench/serving/h200_env.sh
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_decode_graphs.py tests/engine/test_piecewise_graphs.py \
  tests/engine/test_fp8.py -k "not default_model" 2>&1 | grep -v Warning | tail -4 | tee $OUT/h200_tests_decode_graphs.log
echo "tests: ${SECONDS} s"
trace_8b_128 h200_trace_decode_graphs
echo "trace: ${SECONDS} s"
served_8b_128 h200_serving_decode_graphs_8b
echo "total: ${SECONDS} s"
# then once more on the warm machine: served_8b_128 h200_serving_decode_graphs_8b_run2; trace_8b_128 h200_trace_decode_graphs_run2
