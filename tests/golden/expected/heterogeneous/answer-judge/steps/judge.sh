#!/bin/bash
# Step judge of service judge (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin judge 2 1
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free 8001 || exit 1
fi

gym_step_run vllm serve Qwen/Qwen3-8B --port 8001 --tensor-parallel-size 1 --served-model-name Qwen/Qwen3-8B gym-job-20260101T000000Z-000000-answer-judge-judge
