#!/bin/bash
# Step policy of service policy (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 1
export HF_HOME='/data/hf cache'
export NODE_LOCAL="${TMPDIR-}"
export HF_TOKEN="${GYM_HOST_POLICY__HF_TOKEN-}"

# pre_command, as written in the config:
set +u
unset NCCL_SOCKET_IFNAME
echo "pre $SLURM_JOB_ID"

set -u
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free "${GYM_PORT_POLICY}" || exit 1
fi

# Its port was claimed on this node when the job started (ports.py).
gym_step_run vllm serve $'/models/Qwen3 8B (it\'s "quoted")' --port "${GYM_PORT_POLICY}" --tensor-parallel-size 4 --pipeline-parallel-size 2 --served-model-name qwen gym-job-20260101T000000Z-000000-answer-judge-policy --trust-remote-code --max-model-len 8192 --override-generation-config '{"temperature": 0.6}'
