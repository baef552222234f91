#!/bin/bash
# Step policy-prefill of service policy-prefill (plain) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy-prefill 0 1
VLLM_NIXL_SIDE_CHANNEL_HOST=$(gym_node_ip "$(gym_this_node)")
export VLLM_NIXL_SIDE_CHANNEL_HOST
export VLLM_NIXL_SIDE_CHANNEL_PORT="${GYM_PORT_POLICY_PREFILL_NIXL-}"
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free "${GYM_PORT_POLICY_PREFILL}" || exit 1
fi

# Its port was claimed on this node when the job started (ports.py).
gym_step_run vllm serve /ckpt/step-100 --port "${GYM_PORT_POLICY_PREFILL}" --tensor-parallel-size 1 --served-model-name /ckpt/step-100 gym-job-20260101T000000Z-000000-shared-deployment-policy-prefill --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'
