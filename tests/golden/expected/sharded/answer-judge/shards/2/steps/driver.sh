#!/bin/bash
# The benchmark driver for answer-judge: NeMo Gym's gym eval run.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin driver 0 1
mkdir -p "$GYM_JOB_DIR/artifacts"
# gym writes Hydra outputs and prepared data into its working directory: keep them in the job.
mkdir -p "$GYM_JOB_DIR/work" && cd "$GYM_JOB_DIR/work" || exit 1

# Shard 2 of 3: gym prepares the benchmark's inputs as one job would, then this
# shard keeps its slice of them, which gym eval run takes as its prepared data.
gym_log "driver: shard 2 of 3: gym dataset collate"
gym dataset collate --model-type openai_model '+config_paths=["benchmarks/answer-judge/config.yaml"]' '+split="benchmark"' +num_repeats=4 '+policy_base_url="http://localhost:8000/v1"' '+policy_model_name="ckpt"' '+policy_api_key="dummy"' +mode=train_preparation +should_download=true +output_dirpath=/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/2/artifacts/rollouts/preprocessed_datasets || exit 1
python3 "$GYM_JOB_DIR/steps/shards.py" slice /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/2/artifacts/rollouts/preprocessed_datasets benchmark 2 3 12 || exit 1

run_cmd=(
    gym
    eval
    run
    +output_jsonl_fpath=/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/2/artifacts/rollouts.jsonl
    --model-type
    openai_model
    '+config_paths=["benchmarks/answer-judge/config.yaml"]'
    '+split="benchmark"'
    +num_repeats=4
    '+policy_base_url="http://localhost:8000/v1"'
    '+policy_model_name="ckpt"'
    '+policy_api_key="dummy"'
    +reuse_existing_data_preparation=true
    +disable_aggregation=true
)
# Resubmitted (gym eval resubmit): keep every row on disk, generate only the pairs they lack.
if [ -e "$GYM_JOB_DIR/.gym/continue" ]; then
    run_cmd+=(++resume_from_cache=true)
fi
gym_log "driver: ${run_cmd[*]}"
gym_step_run "${run_cmd[@]}" || exit

# This shard is done. The last shard to finish merges them all: under the benchmark's lock, when
# every shard is done and no merge covered them yet (shards.py decides), gym's servers score the
# union of the shards' rollouts into the benchmark's own artifacts (gym eval aggregate).
python3 "$GYM_JOB_DIR/steps/shards.py" finished /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge 2 "$GYM_JOB_ID" || exit 1
env_cmd=(gym env start --model-type openai_model '+config_paths=["benchmarks/answer-judge/config.yaml"]' '+split="benchmark"' +num_repeats=4 '+policy_base_url="http://localhost:8000/v1"' '+policy_model_name="ckpt"' '+policy_api_key="dummy"')
aggregate_cmd=(gym eval aggregate '+config_paths=[responses_api_models/openai_model/configs/openai_model.yaml]' '+config_paths=["benchmarks/answer-judge/config.yaml"]' '+split="benchmark"' +num_repeats=4 '+policy_base_url="http://localhost:8000/v1"' '+policy_model_name="ckpt"' '+policy_api_key="dummy"' '+input_glob=/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/*/artifacts/rollouts.jsonl' +output_jsonl_fpath=/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/artifacts/rollouts.jsonl)
gym_merge_shards() {
    local fd due rc=1 env_pid ready=0 i log="$GYM_JOB_DIR/logs/merge-servers-$GYM_JOB_ID.log"
    mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym/shards && exec {fd}>>/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym/shards/merge.lock || return 1
    flock -x "$fd" 2>/dev/null || gym_log "WARNING: no lock on /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym/shards/merge.lock here (flock); merging without it"
    python3 "$GYM_JOB_DIR/steps/shards.py" merge-due /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge 3
    due=$?
    if [ "$due" -ne 0 ]; then
        exec {fd}>&-
        [ "$due" -eq 1 ] && gym_log "driver: shard 2 done; another shard merges"
        [ "$due" -eq 1 ]
        return
    fi
    gym_log "driver: every shard is done: merging them (gym env start, then gym eval aggregate)"
    setsid "${env_cmd[@]}" >"$log" 2>&1 &
    env_pid=$!
    for ((i = 0; i < 600; i++)); do
        if grep -q 'servers ready!' "$log" 2>/dev/null; then ready=1; break; fi
        kill -0 "$env_pid" 2>/dev/null || break
        sleep 1
    done
    if [ "$ready" = 1 ]; then
        gym_log "driver: ${aggregate_cmd[*]}"
        "${aggregate_cmd[@]}" &&
            python3 "$GYM_JOB_DIR/steps/shards.py" gather /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge 3 &&
            python3 "$GYM_JOB_DIR/steps/shards.py" merged /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge 3 &&
            rc=0
    else
        gym_log "ERROR: gym's servers did not start for the merge (see $log)"
    fi
    kill -INT -- "-$env_pid" 2>/dev/null
    # gym stops its servers on INT; its Ray may linger: the whole group goes after 10 s.
    for ((i = 0; i < 10; i++)); do kill -0 "$env_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$env_pid" 2>/dev/null
    wait "$env_pid" 2>/dev/null
    exec {fd}>&-
    if [ "$rc" -eq 0 ]; then
        : >"$(gym_state_dir)/merged"
        gym_log "driver: merged 3 shards into /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/artifacts"
    fi
    return "$rc"
}
gym_merge_shards
