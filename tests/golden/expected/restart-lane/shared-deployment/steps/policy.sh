#!/bin/bash
# Step policy of service policy (vllm-router) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 1

# vllm-router in front of the prefill and decode servers, each named by its node's address;
# its ports and the servers' were claimed on this node when the job started (ports.py).
router_targets=()
router_targets+=(--prefill "http://$(gym_node_ip "$(gym_node_name 0)"):${GYM_PORT_POLICY_PREFILL}")
router_targets+=(--decode "http://$(gym_node_ip "$(gym_node_name 0)"):${GYM_PORT_POLICY_DECODE}")
gym_step_run vllm-router --vllm-pd-disaggregation --prefill-policy cache_aware --decode-policy cache_aware --host 0.0.0.0 --intra-node-data-parallel-size 1 --request-timeout-secs 86400 --log-level error --prometheus-host 0.0.0.0 --port "${GYM_PORT_POLICY}" --prometheus-port "${GYM_PORT_POLICY_METRICS}" "${router_targets[@]}"
