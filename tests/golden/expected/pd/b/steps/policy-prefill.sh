#!/bin/bash
# Step policy-prefill of service policy-prefill (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy-prefill 0 1
VLLM_NIXL_SIDE_CHANNEL_HOST=$(gym_node_ip "$(gym_this_node)")
export VLLM_NIXL_SIDE_CHANNEL_HOST
export VLLM_NIXL_SIDE_CHANNEL_PORT=5600
export HF_TOKEN="${GYM_HOST_POLICY_PREFILL__HF_TOKEN-}"
export VLLM_LOGGING_LEVEL=INFO

# pre_command, as written in the config:
set +u
ulimit -n 65536
set -u
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free 8001 || exit 1
fi

gym_step_run vllm serve Qwen/Qwen3-8B --port 8001 --tensor-parallel-size 4 --served-model-name qwen3-8b gym-job-20260101T000000Z-000000-b-policy-prefill --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'
