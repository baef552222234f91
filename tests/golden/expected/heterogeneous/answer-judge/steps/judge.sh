#!/bin/bash
# Step judge of service judge (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin judge 2 1

gym_step_run vllm serve Qwen/Qwen3-8B --port 8001 --tensor-parallel-size 1
