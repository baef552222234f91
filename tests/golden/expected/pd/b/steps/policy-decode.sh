#!/bin/bash
# Step policy-decode of service policy-decode (vllm-dp) on 2 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy-decode 1 2
VLLM_NIXL_SIDE_CHANNEL_HOST=$(gym_node_ip "$(gym_this_node)")
export VLLM_NIXL_SIDE_CHANNEL_HOST
export VLLM_NIXL_SIDE_CHANNEL_PORT=5601
export HF_TOKEN="${GYM_HOST_POLICY_DECODE__HF_TOKEN-}"
export VLLM_LOGGING_LEVEL=DEBUG

# pre_command, as written in the config:
set +u
ulimit -n 65536
set -u
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free 8002 || exit 1
fi

# Data parallel across nodes: the step's first node serves the API, the others run headless ranks.
head_ip=$(gym_node_ip "$(gym_node_name 1)")
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_step_run vllm serve Qwen/Qwen3-8B --port 8002 --tensor-parallel-size 2 --served-model-name qwen3-8b gym-job-20260101T000000Z-000000-b-policy-decode --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}' --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-rpc-port 13346 --data-parallel-address "$head_ip"
else
    gym_step_run vllm serve Qwen/Qwen3-8B --port 8002 --tensor-parallel-size 2 --served-model-name qwen3-8b gym-job-20260101T000000Z-000000-b-policy-decode --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}' --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-rpc-port 13346 --headless --data-parallel-address "$head_ip" --data-parallel-start-rank $((GYM_STEP_RANK * 2))
fi
