#!/bin/bash
# Step policy of service policy (vllm-dp) on 2 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 1 2
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free 8000 || exit 1
fi

# Data parallel across nodes: the step's first node serves the API, the others run headless ranks.
head_ip=$(gym_node_ip "$(gym_node_name 1)")
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_step_run vllm serve m --port 8000 --tensor-parallel-size 2 --served-model-name m gym-job-20260101T000000Z-000000-b2-policy --api-server-count 2 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-rpc-port 13345 --data-parallel-address "$head_ip"
else
    gym_step_run vllm serve m --port 8000 --tensor-parallel-size 2 --served-model-name m gym-job-20260101T000000Z-000000-b2-policy --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-rpc-port 13345 --headless --data-parallel-address "$head_ip" --data-parallel-start-rank $((GYM_STEP_RANK * 2))
fi
