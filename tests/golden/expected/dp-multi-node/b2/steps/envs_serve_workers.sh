#!/bin/bash
# Step envs_serve_workers of service envs (ray-worker) on 1 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin envs_serve_workers 2 1

head=GYM_RAY_ADDRESS_ENVS
my_ip=$(gym_node_ip "$(gym_this_node)")
until ray status --address "${!head}" >/dev/null 2>&1; do sleep 1; done
gym_step_run ray start --num-cpus=8 '--resources={"gpu_node":1.5}' --address="${!head}" --node-ip-address="$my_ip" --block
