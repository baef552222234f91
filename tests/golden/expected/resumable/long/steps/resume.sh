# shellcheck shell=bash
# A resumable benchmark runs as a chain of Slurm jobs over one job directory. The decisions (judge
# the job before this one, stop or go on, queue the successor) are made by resume.py (shipped: steps/py), with the
# node's python3; this file only calls it and keeps the heartbeat the next job measures this one by.
# Rendered by gym orchestration for run gym-job-20260101T000000Z-000000.

gym_resume() {
    python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.resume "$1" --max-retries 2 \
        --max-walltime 1-00:00:00 --max-walltime-seconds 86400 \
        --chain-limit 100 --scheduler slurm_node "${@:2}"
}

# The chain's bookkeeping before any work. $1: the job this one resumes (empty for the first);
# $2: N > 0 when Slurm requeued this very job. Returns 1 when this job must not run.
gym_resume_begin() {
    local rc
    if ! command -v python3 >/dev/null 2>&1; then
        gym_log "ERROR: a resumable benchmark needs python3 on the node that runs the job script"
        gym_phase failed "not resumable here: no python3 on the node that runs the job script"
        exit 1
    fi
    gym_resume begin "$1" "$2"
    rc=$?
    if [ "$rc" -eq 10 ]; then
        return 1
    elif [ "$rc" -ne 0 ]; then
        gym_log "ERROR: the resume judge failed (exit status $rc); see above"
        gym_phase failed "the resume judge failed (exit status $rc); see the job's log"
        exit 1
    fi
    # A sign of life every few seconds: the next job measures this one's time by it, with or
    # without accounting.
    (while :; do
        : >"$(gym_state_dir)/heartbeat"
        sleep 10
    done) &
    # shellcheck disable=SC2034  # gym_finish in job.sh stops it
    GYM_HEARTBEAT_PID=$!
    return 0
}

# This job failed: a failure a rerun would repeat ends the chain here (the judge decides which).
gym_resume_finish() {
    gym_resume finish "$1" "$2" || true
}

# The driver exited 0: are the samples all there? Prints "N of M" and returns 3 when some are
# missing (the job then ends cut short, and its successor finishes them).
gym_resume_missing() {
    python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.resume missing
}
