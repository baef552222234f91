#!/bin/bash
# Step policy of service policy (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 1
export VLLM_SERVER_DEV_MODE=1
export GYM_RELOAD_TOKEN_FILE=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment/.gym/reload.token
export PYTHONPATH=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment/steps/py
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free "${GYM_PORT_POLICY}" || exit 1
fi

# Its port was claimed on this node when the job started (ports.py).
gym_step_run vllm serve /ckpt/step-100 --port "${GYM_PORT_POLICY}" --tensor-parallel-size 1 --served-model-name policy gym-job-20260101T000000Z-000000-shared-deployment-policy --middleware nemo_gym.orchestration.reload_guard.ReloadGuard
