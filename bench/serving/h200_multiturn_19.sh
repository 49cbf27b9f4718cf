#!/bin/bash
# issue 16, 19th session (carry .whl): the multi-turn set (64 four-turn conversations behind one shared 1,000-token
# system prompt, 32 streams), caching on then off in the same run, through 4 API servers and 4 load generators of
# 2 connections each (the 1B message rate, ~17k streamed messages/s, saturates one API server's Python), then again
# through 1 API server and 2 generators of one connection (h200_final_1b.sh's). Results in $OUT.
source bench/serving/h200_env.sh
multiturn_1b h200_multiturn_19th_4_4x2 4 4 2
echo "first: ${SECONDS} s"
multiturn_1b h200_multiturn_19th_1_2x1 1 2 1
echo "total: ${SECONDS} s"
