#!/bin/bash
# The benchmark driver for b: NeMo Gym's gym eval run.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin driver 0 1
mkdir -p "$GYM_JOB_DIR/artifacts"
# gym writes Hydra outputs and prepared data into its working directory: keep them in the job.
mkdir -p "$GYM_JOB_DIR/work" && cd "$GYM_JOB_DIR/work" || exit 1

run_cmd=(
    gym
    eval
    run
    +output_jsonl_fpath=/lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/rollouts.jsonl
    --model-type
    openai_model
    '+policy_model_name="/ckpt/step-100"'
    '+policy_api_key="dummy"'
    +head_server.port="${GYM_PORT_GYM_HEAD_SERVER}"
    '+policy_base_url="http://localhost:'"${GYM_PORT_POLICY}"'/v1"'
)
# Resubmitted (gym eval resubmit): keep every row on disk, generate only the pairs they lack.
if [ -e "$GYM_JOB_DIR/.gym/continue" ]; then
    run_cmd+=(++resume_from_cache=true)
fi
gym_log "driver: ${run_cmd[*]}"
# The gym this job really runs, as its own command says (its first line: "NeMo Gym v0.7.0").
gym_provenance gym_version "$(timeout 60 "${run_cmd[0]}" --version 2>/dev/null | head -n 1)"
gym_step_run "${run_cmd[@]}"
