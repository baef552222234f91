#!/bin/bash
# Step policy of service policy (vllm-gateway) on 2 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin policy 0 2
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    gym_port_free 8000 || exit 1
fi

# 2 vLLM replicas on a Ray cluster across 2 node(s), one endpoint: our gateway
# (gateway/ray_serve_gateway.py, shipped into steps/py) on the first node runs them as a Ray Serve application,
# which routes, streams and replaces a replica that dies; it fails when the service does not recover in time.
head_ip=$(gym_node_ip "$(gym_node_name 0)")
my_ip=$(gym_node_ip "$(gym_this_node)")
if [ "$GYM_STEP_RANK" -eq 0 ]; then
    # Out of the step's process group: stopping the step stops the gateway first, which stops its
    # Serve application and engines, and only then (at the step's end) this Ray head.
    setsid ray start --head --port=6390 --node-ip-address="$my_ip" --metrics-export-port=8080 --disable-usage-stats --block &
    ray_head=$!
    until ray status --address "$head_ip:6390" >/dev/null 2>&1; do
        kill -0 "$ray_head" 2>/dev/null || exit 1
        sleep 0.5
    done
    gym_step_run python3 "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.gateway.ray_serve_gateway --address "$head_ip:6390" \
        --port 8000 --instances 2 --gpus-per-instance 1 \
        --min-nodes 2 --startup-timeout 60 \
        --log-dir "$GYM_JOB_DIR/logs/policy-replicas-$GYM_JOB_ID" \
        --why-file "$(gym_state_dir)/why/$GYM_STEP_NAME@$(gym_this_node)" -- vllm serve m --tensor-parallel-size 1 --served-model-name served gym-job-20260101T000000Z-000000-b-policy
else
    until ray status --address "$head_ip:6390" >/dev/null 2>&1; do sleep 1; done
    gym_step_run ray start --address="$head_ip:6390" --node-ip-address="$my_ip" --metrics-export-port=8080 --block
fi
