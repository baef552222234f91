#!/bin/bash
# Step policy of service policy (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 1
export VLLM_LOGGING_LEVEL=INFO
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free 18000 || exit 1
fi

gym_step_run vllm serve /models/tiny --port 18000 --tensor-parallel-size 2 --served-model-name tiny gym-job-20260101T000000Z-000000-first-policy
