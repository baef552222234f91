#!/bin/bash
# Step policy of service policy (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 1

gym_step_run vllm serve m --port 8100 --tensor-parallel-size 1
