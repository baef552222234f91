#!/bin/bash
# The benchmark driver for b: NeMo Gym's gym eval run.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin driver 0 1
export OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:"${GYM_PORT_OTEL_HTTP}"
export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
export OTEL_SERVICE_NAME=gym-driver
export OTEL_RESOURCE_ATTRIBUTES=run_id=gym-job-20260101T000000Z-000000,benchmark=b,cluster=cluster
export NEMO_GYM_OTEL_ENABLED=1
export NEMO_GYM_OTEL_RUN_ID=gym-job-20260101T000000Z-000000
export NEMO_GYM_OTEL_SPAN_GROUPS=default,verify
export NEMO_GYM_OTEL_LOGS_ENABLED=1
export OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=http://localhost:"${GYM_PORT_OTEL_HTTP}"/v1/logs
mkdir -p "$GYM_JOB_DIR/artifacts"

# Install NeMo Gym at the pinned ref into a fresh venv (a local repository path works offline).
gym_src=$(mktemp -d "${TMPDIR:-/tmp}/gym-install-XXXXXX")
git clone --quiet /opt/src/gym "$gym_src/gym" || exit 1
git -C "$gym_src/gym" checkout --quiet v0.7.0 || exit 1
python3 -m venv "$gym_src/venv" || exit 1
"$gym_src/venv/bin/pip" install --quiet -e "$gym_src/gym[telemetry]" || exit 1
PATH="$gym_src/venv/bin:$PATH"
cd "$gym_src/gym" || exit 1

run_cmd=(
    gym
    eval
    run
    +output_jsonl_fpath=/lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/rollouts.jsonl
    --model-type
    openai_model
    '+policy_model_name="served"'
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
