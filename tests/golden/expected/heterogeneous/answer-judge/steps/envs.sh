#!/bin/bash
# Step envs of service envs (ray-head) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin envs 0 1

my_ip=$(gym_node_ip "$(gym_this_node)")
gym_step_run ray start --head --port=6379 --node-ip-address="$my_ip" --block &
ray_head=$!
until ray status --address "$my_ip:6379" >/dev/null 2>&1; do
    kill -0 "$ray_head" 2>/dev/null || exit 1
    sleep 0.5
done
# Ready when every worker node has joined: the driver may schedule onto any of them.
until [ "$(gym_ray_alive_nodes "$my_ip:6379")" -ge 3 ]; do
    kill -0 "$ray_head" 2>/dev/null || exit 1
    sleep 0.5
done
gym_mark_ready
wait "$ray_head"
