#!/bin/bash
# Step pd of service pd (vllm-router) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin pd 0 1

# vllm-router in front of the prefill and decode servers, each named by its node's address.
router_targets=()
router_targets+=(--prefill "http://$(gym_node_ip "$(gym_node_name 0)"):9001")
router_targets+=(--prefill "http://$(gym_node_ip "$(gym_node_name 1)"):9001")
router_targets+=(--decode "http://$(gym_node_ip "$(gym_node_name 2)"):9002")
router_targets+=(--decode "http://$(gym_node_ip "$(gym_node_name 3)"):9002")
gym_step_run vllm-router --vllm-pd-disaggregation --prefill-policy round_robin --decode-policy cache_aware --host 0.0.0.0 --intra-node-data-parallel-size 1 --request-timeout-secs 600 --log-level error --prometheus-host 0.0.0.0 --port 9000 --prometheus-port 29000 "${router_targets[@]}"
