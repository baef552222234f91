#!/bin/bash
# Step pd-prefill of service pd-prefill (plain) on 2 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin pd-prefill 0 2
VLLM_NIXL_SIDE_CHANNEL_HOST=$(gym_node_ip "$(gym_this_node)")
export VLLM_NIXL_SIDE_CHANNEL_HOST
export VLLM_NIXL_SIDE_CHANNEL_PORT=7000
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free 9001 || exit 1
fi
if [ "$GYM_STEP_RANK" -eq 1 ]; then
    gym_port_free 9001 || exit 1
fi

gym_step_run vllm serve m --port 9001 --tensor-parallel-size 1 --served-model-name m gym-job-20260101T000000Z-000000-b-pd-prefill --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'
