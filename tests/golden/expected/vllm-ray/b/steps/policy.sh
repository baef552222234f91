#!/bin/bash
# Step policy of service policy (vllm-ray) on 2 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 2
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free 8000 || exit 1
fi

# One instance across 2 nodes: a Ray cluster of its own, vLLM on the first node.
head_ip=$(gym_node_ip "$(gym_node_name 0)")
my_ip=$(gym_node_ip "$(gym_this_node)")
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    # Blocking, in the background: the Ray head belongs to this step and ends with it.
    ray start --head --port=6390 --node-ip-address="$my_ip" --disable-usage-stats --block &
    ray_head=$!
    until ray status --address "$head_ip:6390" >/dev/null 2>&1; do
        kill -0 "$ray_head" 2>/dev/null || exit 1
        sleep 0.5
    done
    until [ "$(gym_ray_alive_nodes "$head_ip:6390")" -ge 2 ]; do
        kill -0 "$ray_head" 2>/dev/null || exit 1
        sleep 1
    done
    gym_step_run vllm serve big --port 8000 --tensor-parallel-size 4 --pipeline-parallel-size 2 --served-model-name big gym-job-20260101T000000Z-000000-b-policy --distributed-executor-backend ray
else
    until ray status --address "$head_ip:6390" >/dev/null 2>&1; do sleep 1; done
    gym_step_run ray start --address="$head_ip:6390" --node-ip-address="$my_ip" --block
fi
