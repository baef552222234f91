#!/bin/bash
# Step pd-decode of service pd-decode (plain) on 2 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin pd-decode 2 2
VLLM_NIXL_SIDE_CHANNEL_HOST=$(gym_node_ip "$(gym_this_node)")
export VLLM_NIXL_SIDE_CHANNEL_HOST
export VLLM_NIXL_SIDE_CHANNEL_PORT=7001
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free 9002 || exit 1
fi
if [ "$GYM_STEP_RANK" -eq 1 ]; then
    gym_port_free 9002 || exit 1
fi

gym_step_run vllm serve m --port 9002 --tensor-parallel-size 1 --served-model-name m gym-job-20260101T000000Z-000000-b-pd-decode --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'
