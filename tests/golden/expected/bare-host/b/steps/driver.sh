#!/bin/bash
# The benchmark driver for b: NeMo Gym's gym eval prepare, then NeMo Gym's gym eval run.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin driver 0 1
export OPENAI_API_KEY=dummy
mkdir -p "$GYM_JOB_DIR/artifacts"

# Install NeMo Gym at the pinned ref into a fresh venv (a local repository path works offline).
gym_src=$(mktemp -d "${TMPDIR:-/tmp}/gym-install-XXXXXX")
git clone --quiet /srv/mirrors/gym.git "$gym_src/gym" || exit 1
git -C "$gym_src/gym" checkout --quiet v0.7.0 || exit 1
python3 -m venv "$gym_src/venv" || exit 1
"$gym_src/venv/bin/pip" install --quiet -e "$gym_src/gym" || exit 1
PATH="$gym_src/venv/bin:$PATH"
cd "$gym_src/gym" || exit 1

gym_log "driver: gym eval prepare"
gym eval prepare '+split="validation"' || exit 1

run_cmd=(
    gym
    eval
    run
    +output_jsonl_fpath=/lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/rollouts.jsonl
    +num_repeats=2
    '+policy_model_name="m"'
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
