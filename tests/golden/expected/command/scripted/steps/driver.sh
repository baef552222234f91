#!/bin/bash
# The benchmark driver for scripted: NeMo Gym's gym eval prepare, then the benchmark's own command.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin driver 0 1
# driver.policy_host is read here, on the driver's node.
if [ -z "${HEAD_NODE_IP:-}" ]; then
    gym_log "ERROR: driver.policy_host is runtime:HEAD_NODE_IP, but HEAD_NODE_IP is not set on node $(gym_this_node)"
    exit 1
fi
export NEMO_GYM_BENCH_DIR=/lustre/runs/gym-job-20260101T000000Z-000000/scripted
export NEMO_GYM_POLICY_BASE_URL=http:"//${HEAD_NODE_IP}":8100/v1
export NEMO_GYM_POLICY_MODEL_NAME=m
export NEMO_GYM_POLICY_API_KEY=dummy
mkdir -p "$GYM_JOB_DIR/artifacts"
# gym writes Hydra outputs and prepared data into its working directory: keep them in the job.
mkdir -p "$GYM_JOB_DIR/work" && cd "$GYM_JOB_DIR/work" || exit 1

gym_log "driver: gym eval prepare"
gym eval prepare '+split="test"' || exit 1

# The benchmark's own command (steps/command.sh, exactly as written in the config), with
# bash's -e -u -o pipefail as NeMo Gym runs it.
gym_log "driver: the benchmark's command"
gym_step_run bash -euo pipefail "$GYM_JOB_DIR/steps/command.sh"
