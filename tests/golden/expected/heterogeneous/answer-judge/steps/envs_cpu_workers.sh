#!/bin/bash
# Step envs_cpu_workers of service envs (ray-worker) on 2 node(s), once per node.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin envs_cpu_workers 3 2

head=GYM_RAY_ADDRESS_ENVS
my_ip=$(gym_node_ip "$(gym_this_node)")
until ray status --address "${!head}" >/dev/null 2>&1; do sleep 1; done
gym_step_run ray start '--resources={"sandbox":32}' --address="${!head}" --node-ip-address="$my_ip" --block
