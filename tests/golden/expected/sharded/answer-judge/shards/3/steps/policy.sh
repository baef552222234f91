#!/bin/bash
# Step policy of service policy (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 1
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free "${GYM_PORT_POLICY}" || exit 1
fi

# Its port was claimed on this node when the job started (ports.py).
gym_step_run vllm serve /models/step-1000 --port "${GYM_PORT_POLICY}" --tensor-parallel-size 1 --served-model-name ckpt gym-job-20260101T000000Z-000000-3-policy
