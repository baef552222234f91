#!/usr/bin/env bash
# Run NeMo Gym's offline `answer-judge` benchmark against an OpenAI-compatible
# endpoint (e.g. the vLLM server from serve_vllm.sh), using the environments
# built by scripts/setup-envs. Works from any cwd and needs no network.
#
# usage: run_answer_judge.sh BASE_URL MODEL_NAME OUT_DIR [extra gym args...]
#   BASE_URL    the endpoint including /v1, e.g. http://127.0.0.1:8000/v1
#   MODEL_NAME  the served model name, e.g. tiny
#   OUT_DIR     results go here (created; earlier results in it are replaced)
#   extra args  passed on to `gym eval run`, e.g. +limit=3
# env:
#   GYM_ENVS_DIR       as in setup-envs
#   MODEL_TYPE         openai_model (default; calls /v1/responses) or
#                      vllm_model (calls /v1/chat/completions)
#   POLICY_API_KEY     sent as the bearer token (default: dummy)
#   MAX_OUTPUT_TOKENS  per-rollout generation cap (default 64; keeps prompt +
#                      output inside a 2048-token context: prompts are <=1.6k)
#
# Writes into OUT_DIR:
#   rollouts.jsonl                       one line per rollout, with reward, tp/fp/fn/tn, response, ...
#   rollouts_aggregate_metrics.json      [{agent_ref, key_metrics, agent_metrics, group_level_metrics, ...}]
#   rollouts_materialized_inputs.jsonl, rollouts_failures.jsonl, rollout_verdicts.jsonl,
#   quality_summary.json, rollouts/preprocessed_datasets/{benchmark.jsonl,benchmark_metrics.json}
#   gym.log                              the driver's full console output
#   gym-work/                            the driver's cwd (Hydra config dump, dataset metrics)
set -euo pipefail

if (($# < 3)); then
    sed -n '6,18p' "$0" >&2
    exit 2
fi
base_url=${1%/}
model_name=$2
out_dir=$3
shift 3

envs=${GYM_ENVS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gym-orchestration/envs}
gym_venv="$envs/gym"
server_venvs="$envs/gym-server-venvs"
model_type=${MODEL_TYPE:-openai_model}
api_key=${POLICY_API_KEY:-dummy}
benchmark=answer-judge

if [[ ! -f $gym_venv/.setup-envs-done || ! -d $server_venvs ]]; then
    echo "run_answer_judge: gym environment missing under $envs; run: scripts/setup-envs --only gym" >&2
    exit 1
fi

# Offline: no hub look-ups, no Ray usage reporting.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RAY_USAGE_STATS_ENABLED=0
# `gym` and `python` below are the gym venv's. (The servers gym spawns do
# not need this: they source their own venv's activate script.)
export PATH="$gym_venv/bin:$PATH"

# Fail fast (gym would first spend ~10 s starting Ray and four servers).
if ! curl -sf -m 10 -H "Authorization: Bearer $api_key" "$base_url/models" >/dev/null; then
    echo "run_answer_judge: no OpenAI-compatible server answers at $base_url/models" >&2
    exit 1
fi

# The config names its data by a relative path, looked up under the cwd and
# then under site-packages (the wheel's install root). setup-envs prepares it
# in site-packages; prepare again only if it has gone missing. `gym eval
# prepare` must run from site-packages (it checks the prepare script's path
# relative to the cwd), and hydra.run.dir keeps its Hydra dump out of there.
site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [[ ! -s $site/benchmarks/$benchmark/data/${benchmark}_benchmark.jsonl ]]; then
    echo "run_answer_judge: preparing $benchmark data"
    (cd "$site" && gym eval prepare --benchmark "$benchmark" hydra.run.dir="$(mktemp -d)")
fi

mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
# Earlier results would be mixed with this run's (the rollouts file is
# appended to when resuming), so start clean.
rm -rf "$out_dir/rollouts" "$out_dir/gym-work" "$out_dir"/rollout*.json* "$out_dir/quality_summary.json"
work="$out_dir/gym-work"
mkdir -p "$work"

# Why each override:
#   +split=benchmark              required: without it "missing required configuration: split"
#   +uv_venv_dir / +skip_venv_if_present
#                                 start every server from the prebuilt links to the gym venv
#                                 instead of `uv venv` + `uv pip install` (needs uv, a Python
#                                 download, and fails on nemo-gym's Requires-Python)
#   +cache_dir                    keep any server cache with the run, not in the cwd
#   hydra.run.dir                 Hydra's config dump goes here rather than ./outputs/<date>/<time>
# cwd = gym-work: the driver writes benchmarks/<b>/data/*_metrics.json relative to its cwd.
cmd=(gym eval run
    --benchmark "$benchmark"
    --model-type "$model_type"
    "+policy_base_url=$base_url"
    "+policy_model_name=$model_name"
    "+policy_api_key=$api_key"
    "+output_jsonl_fpath=$out_dir/rollouts.jsonl"
    +split=benchmark
    "++responses_create_params.max_output_tokens=${MAX_OUTPUT_TOKENS:-64}"
    "+uv_venv_dir=$server_venvs"
    +skip_venv_if_present=true
    "+cache_dir=$work/cache"
    "hydra.run.dir=$work/hydra"
    "$@")
printf 'run_answer_judge: (cd %q &&' "$work"
printf ' %q' "${cmd[@]}"
printf ')\n'

start=$SECONDS
rc=0
(cd "$work" && "${cmd[@]}") 2>&1 | tee "$out_dir/gym.log" || rc=$?
if ((rc != 0)); then
    echo "run_answer_judge: gym eval run failed (rc=$rc); log: $out_dir/gym.log" >&2
    exit "$rc"
fi

metrics="$out_dir/rollouts_aggregate_metrics.json"
if [[ ! -s $out_dir/rollouts.jsonl || ! -s $metrics ]]; then
    echo "run_answer_judge: gym exited 0 but wrote no rollouts/metrics in $out_dir" >&2
    exit 1
fi
python - "$metrics" "$out_dir/rollouts.jsonl" "$((SECONDS - start))" <<'EOF'
import json, sys
metrics_path, rollouts_path, secs = sys.argv[1:]
with open(rollouts_path) as fh:
    n = sum(1 for line in fh if line.strip())
for entry in json.load(open(metrics_path)):
    name = entry.get("agent_ref", {}).get("name")
    km = entry.get("key_metrics", {})
    print(f"run_answer_judge: {n} rollouts in {secs}s; {name}: "
          + ", ".join(f"{k}={v}" for k, v in km.items()))
EOF
