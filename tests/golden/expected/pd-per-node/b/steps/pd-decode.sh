#!/bin/bash
# Step pd-decode of service pd-decode (plain) on 2 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin pd-decode 2 2
VLLM_NIXL_SIDE_CHANNEL_HOST=$(gym_node_ip "$(gym_this_node)")
export VLLM_NIXL_SIDE_CHANNEL_HOST
export VLLM_NIXL_SIDE_CHANNEL_PORT=7001

gym_step_run vllm serve m --port 9002 --tensor-parallel-size 1 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'
