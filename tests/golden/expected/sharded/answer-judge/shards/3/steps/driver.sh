#!/bin/bash
# The benchmark driver for answer-judge: NeMo Gym's gym eval run.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin driver 0 1
mkdir -p "$GYM_JOB_DIR/artifacts"
# gym writes Hydra outputs and prepared data into its working directory: keep them in the job.
mkdir -p "$GYM_JOB_DIR/work" && cd "$GYM_JOB_DIR/work" || exit 1

# Shard 3 of 3: not done until it ends well again (a merge meanwhile would take its
# old rows). gym prepares the benchmark's inputs as one job would, then this shard keeps its slice
# of them, which gym eval run takes as its prepared data.
python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.shards starting /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge 3 || exit 1
gym_log "driver: shard 3 of 3: gym dataset collate"
gym dataset collate --model-type openai_model '+config_paths=["benchmarks/answer-judge/config.yaml"]' '+split="benchmark"' +num_repeats=4 '+policy_base_url="http://localhost:8000/v1"' '+policy_model_name="ckpt"' '+policy_api_key="dummy"' +mode=train_preparation +should_download=true +output_dirpath=/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/3/artifacts/rollouts/preprocessed_datasets || exit 1
python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.shards slice /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/3/artifacts/rollouts/preprocessed_datasets benchmark 3 3 12 || exit 1

run_cmd=(
    gym
    eval
    run
    +output_jsonl_fpath=/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/3/artifacts/rollouts.jsonl
    --model-type
    openai_model
    '+config_paths=["benchmarks/answer-judge/config.yaml"]'
    '+split="benchmark"'
    +num_repeats=4
    '+policy_model_name="ckpt"'
    '+policy_api_key="dummy"'
    +reuse_existing_data_preparation=true
    +disable_aggregation=true
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
gym_step_run "${run_cmd[@]}" || exit

# This shard is done. The shard that holds the benchmark's lock merges, for as long as a merge is
# due (every shard done, these done markers not merged yet: shards.py decides): gym's servers score
# the union of the shards' rollouts into the benchmark's own artifacts (gym eval aggregate). A
# shard that finds the lock held leaves it to the holder, which looks again before letting go.
python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.shards finished /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge 3 "$GYM_JOB_ID" || exit 1
env_cmd=(gym env start --model-type openai_model '+config_paths=["benchmarks/answer-judge/config.yaml"]' '+split="benchmark"' +num_repeats=4 '+policy_model_name="ckpt"' '+policy_api_key="dummy"' +head_server.port="${GYM_PORT_GYM_HEAD_SERVER}" '+policy_base_url="http://localhost:'"${GYM_PORT_POLICY}"'/v1"')
aggregate_cmd=(gym eval aggregate '+config_paths=[responses_api_models/openai_model/configs/openai_model.yaml]' '+config_paths=["benchmarks/answer-judge/config.yaml"]' '+split="benchmark"' +num_repeats=4 '+policy_model_name="ckpt"' '+policy_api_key="dummy"' '+input_glob=/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/*/artifacts/rollouts.jsonl' +output_jsonl_fpath=/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/artifacts/rollouts.jsonl +head_server.port="${GYM_PORT_GYM_HEAD_SERVER}" '+policy_base_url="http://localhost:'"${GYM_PORT_POLICY}"'/v1"')
gym_merge_env_pid=''
gym_stop_merge_servers() {
    local i
    [ -n "$gym_merge_env_pid" ] || return 0
    # gym env start and everything it started: a session of their own.
    kill -TERM -- "-$gym_merge_env_pid" 2>/dev/null
    for ((i = 0; i < 10; i++)); do kill -0 "$gym_merge_env_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$gym_merge_env_pid" 2>/dev/null
    wait "$gym_merge_env_pid" 2>/dev/null
    gym_merge_env_pid=''
}
# gym_step_run's trap named its own child, gone now: a TERM from here on stops the merge's servers.
# shellcheck disable=SC2317  # run by the trap
trap 'gym_stop_merge_servers; exit 143' TERM INT
# gym's servers for the merge, once; they must not hold the lock (their own fd of it closed).
gym_merge_servers() {
    local i log="$GYM_JOB_DIR/logs/merge-servers-$GYM_JOB_ID.log"
    [ -z "$gym_merge_env_pid" ] || return 0
    setsid "${env_cmd[@]}" >"$log" 2>&1 {gym_merge_lock}>&- &
    gym_merge_env_pid=$!
    for ((i = 0; i < 600; i++)); do
        grep -q 'servers ready!' "$log" 2>/dev/null && return 0
        kill -0 "$gym_merge_env_pid" 2>/dev/null || break
        sleep 1
    done
    gym_log "ERROR: gym's servers did not start for the merge (see $log)"
    return 1
}
gym_merge_shards() {
    local got due rc=0 seen merges=0
    seen="$(gym_state_dir)/merge-seen"
    mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym/shards && exec {gym_merge_lock}>>/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym/shards/merge.lock || return 1
    # Waiting a little covers a holder that has just looked for the last time and is letting go.
    flock -w 5 -E 75 "$gym_merge_lock" 2>/dev/null
    got=$?
    if [ "$got" -eq 75 ]; then
        exec {gym_merge_lock}>&-
        gym_log "driver: shard 3 done; the shard merging now merges it too"
        return 0
    fi
    [ "$got" -eq 0 ] || gym_log "WARNING: no lock on /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym/shards/merge.lock here (flock); merging without it"
    while :; do
        python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.shards merge-due /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge 3 "$seen"
        due=$?
        [ "$due" -ne 1 ] || break
        [ "$due" -eq 0 ] || { rc=1; break; }
        gym_log "driver: every shard is done: merging them (gym env start, then gym eval aggregate)"
        gym_merge_servers || { rc=1; break; }
        gym_log "driver: ${aggregate_cmd[*]}"
        if ! "${aggregate_cmd[@]}" ||
            ! python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.shards gather /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge 3 ||
            ! python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.shards merged /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge "$seen"; then
            rc=1
            break
        fi
        : >"$(gym_state_dir)/merged"
        merges=$((merges + 1))
        gym_log "driver: merged 3 shards into /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/artifacts"
    done
    [ "$rc" -ne 0 ] || [ "$merges" -gt 0 ] || gym_log "driver: shard 3 done; no merge due (a shard still runs, or one merged these)"
    exec {gym_merge_lock}>&-
    gym_stop_merge_servers
    return "$rc"
}
gym_merge_shards
