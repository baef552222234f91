#!/bin/bash
# Step policy of service policy (vllm-router) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 1
export HF_TOKEN="${GYM_HOST_POLICY__HF_TOKEN-}"
export VLLM_LOGGING_LEVEL=INFO

# pre_command, as written in the config:
set +u
ulimit -n 65536
set -u

# vllm-router in front of the prefill and decode servers, each named by its node's address.
router_targets=()
router_targets+=(--prefill "http://$(gym_node_ip "$(gym_node_name 0)"):8001")
router_targets+=(--decode "http://$(gym_node_ip "$(gym_node_name 1)"):8002")
gym_step_run vllm-router --vllm-pd-disaggregation --prefill-policy cache_aware --decode-policy cache_aware --host 0.0.0.0 --intra-node-data-parallel-size 1 --request-timeout-secs 86400 --log-level error --prometheus-host 0.0.0.0 --port 8000 --prometheus-port 29000 "${router_targets[@]}"
