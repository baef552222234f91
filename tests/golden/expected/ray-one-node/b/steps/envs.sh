#!/bin/bash
# Step envs of service envs (ray-head) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin envs 0 1

my_ip=$(gym_node_ip "$(gym_this_node)")
# Its ports were claimed on this node when the job started (ports.py).
gym_step_run ray start --head --num-cpus=4 --port="${GYM_PORT_ENVS}" --dashboard-port="${GYM_PORT_ENVS_DASHBOARD}" --dashboard-agent-listen-port="${GYM_PORT_ENVS_DASHBOARD_AGENT}" --node-ip-address="$my_ip" --block &
ray_head=$!
until ray status --address "$my_ip:${GYM_PORT_ENVS}" >/dev/null 2>&1; do
    kill -0 "$ray_head" 2>/dev/null || exit 1
    sleep 0.5
done
gym_mark_ready
wait "$ray_head"
