#!/bin/bash
# Step policy of service policy (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 1

gym_step_run vllm serve /models/step-1000 --port 8000 --tensor-parallel-size 1 --served-model-name ckpt
