#!/bin/bash
# issue 16, 18th session (carry .whl): o_proj and down at decode sizes through the Triton split fp8 product
# (triton_fp8_mm.py) instead of cuBLAS over two streams. The fp8 CUDA tests; the engine's projections at 1, 64 and 256
# rows; the 8B fp8 128 / 128 @256 step loop in process (fp8 cache); then served through gRPC. Results in $OUT.
source bench/serving/h200_env.sh
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/engine/test_fp8.py -k "not default_model" 2>&1 | grep -v Warning | tail -4 \
  | tee $OUT/h200_tests_split_mm.log
timeout 60 python3 -m bench.engine.fp8_gemm --shape llama-8b --rows 1,64,256 2>&1 | quiet | tee $OUT/h200_fp8_gemm_split_mm_8b.log
echo "tests and products: ${SECONDS} s"
trace_8b_128 h200_trace_split_mm
echo "trace: ${SECONDS} s"
served_8b_128 h200_serving_split_mm_8b
echo "total: ${SECONDS} s"
