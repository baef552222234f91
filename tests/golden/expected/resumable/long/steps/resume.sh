# shellcheck shell=bash
# A resumable benchmark runs as a chain of Slurm jobs over one job directory. Each job first queues
# its successor (afternotok: it runs only if this job ends badly), and that successor decides from
# what this job left whether to go on from the rollouts on disk or to stop. It asks Slurm first
# (scontrol, then sacct where there is accounting) and the job's own files after, so it works on
# clusters without accounting. Every decision is appended to .gym/chain, which `gym eval status` reads.
# Rendered by gym orchestration for run gym-job-20260101T000000Z-000000.
#
# The rules: a job cut short (walltime, preemption, a Slurm requeue) after writing new rollouts
# resumes for free; a cut-short job without progress, a node failure, a service dying and a kill
# nobody explains each spend a retry (2 allowed). A failure that a rerun
# would repeat (a service that never started, the driver failing) stops the chain, as does a cancel.
# The chain also stops when its jobs have used max_walltime together, and never exceeds 100 jobs.

GYM_CHAIN_FILE="$GYM_JOB_DIR/.gym/chain"
GYM_MAX_RETRIES=2
GYM_MAX_WALLTIME_SECONDS=86400
GYM_MAX_WALLTIME=1-00:00:00
GYM_CHAIN_LIMIT=100

# One tab-separated record: start ID EPOCH ROLLOUTS | successor ID AFTER | nosuccessor ID WHY |
# verdict ID OUTCOME ELAPSED ROLLOUTS free|retry|stop WHY | end STATE WHY
gym_chain() {
    local IFS=$'\t'
    printf '%s\n' "$*" >>"$GYM_CHAIN_FILE"
}

gym_chain_count() {
    awk -F'\t' -v k="$1" -v a="${2:-}" '$1 == k && (a == "" || $6 == a) {n++} END {print n + 0}' "$GYM_CHAIN_FILE" 2>/dev/null
}

# Column COL of the last record of KIND whose second column is ID.
gym_chain_value() {
    awk -F'\t' -v k="$1" -v id="$2" -v c="$3" '$1 == k && $2 == id {v = $c} END {print v}' "$GYM_CHAIN_FILE" 2>/dev/null
}

# The job queued to resume job $1 (empty when none was).
gym_successor_of() {
    awk -F'\t' -v id="$1" '$1 == "successor" && $3 == id {v = $2} END {print v}' "$GYM_CHAIN_FILE" 2>/dev/null
}

gym_chain_latest() {
    awk -F'\t' '$1 == "start" {id = $2} END {print id}' "$GYM_CHAIN_FILE" 2>/dev/null
}

gym_rollouts_now() {
    local n
    n=$(wc -l <"$GYM_JOB_DIR/artifacts/rollouts.jsonl" 2>/dev/null) || n=0
    printf '%s' "$((n + 0))"
}

# How long job $1 ran: from its start record to the last sign of life it left in its state dir $2.
gym_job_elapsed() {
    local started last
    started=$(gym_chain_value start "$1" 3)
    last=$(stat -c %Y "$2/heartbeat" "$2/state" 2>/dev/null | sort -n | tail -n 1)
    if [ -z "$started" ] || [ -z "$last" ] || [ "$last" -lt "$started" ]; then
        printf '0'
    else
        printf '%s' "$((last - started))"
    fi
}

# What ended job $1, one word: succeeded, cancelled, timeout, preempted, node-failure,
# out-of-memory, or the job's own record of its cause (see gym_finish in job.sh), or unknown.
gym_job_outcome() {
    local id=$1 dir="$GYM_JOB_DIR/.gym/$1" slurm cause
    if grep -qx 'phase=succeeded' "$dir/state" 2>/dev/null; then
        printf 'succeeded'
        return
    fi
    if [ -e "$GYM_JOB_DIR/.gym/cancelled" ] || [ -e "$dir/cancelled" ]; then
        printf 'cancelled'
        return
    fi
    slurm=$(scontrol show job -o "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -n 1)
    slurm=${slurm#JobState=}
    if [ -z "$slurm" ] && command -v sacct >/dev/null 2>&1; then
        slurm=$(sacct -X -n -P -j "$id" -o State 2>/dev/null | head -n 1 | awk '{print $1}')
    fi
    case "$slurm" in
        TIMEOUT | DEADLINE) printf 'timeout' && return ;;
        PREEMPTED) printf 'preempted' && return ;;
        NODE_FAIL | BOOT_FAIL) printf 'node-failure' && return ;;
        OUT_OF_MEMORY) printf 'out-of-memory' && return ;;
        CANCELLED*) printf 'cancelled' && return ;;
    esac
    cause=$(cat "$dir/cause" 2>/dev/null)
    printf '%s' "${cause:-unknown}"
}

# The action for an outcome: free (resume), retry (resume, spending a retry) or stop.
gym_resume_action() {
    local outcome=$1 progress=$2
    case "$outcome" in
        succeeded | cancelled | startup-failed | driver-failed) printf 'stop' ;;
        timeout | preempted | walltime | requeued)
            if [ "$progress" -gt 0 ]; then printf 'free'; else printf 'retry'; fi
            ;;
        *) printf 'retry' ;;
    esac
}

gym_outcome_text() {
    case "$1" in
        succeeded) printf 'it succeeded' ;;
        cancelled) printf 'it was cancelled' ;;
        timeout | walltime) printf 'it reached its walltime' ;;
        preempted) printf 'it was preempted' ;;
        requeued) printf 'Slurm requeued it (node failure or preemption)' ;;
        node-failure) printf 'a node failed' ;;
        out-of-memory) printf 'it ran out of memory' ;;
        service-died) printf 'a service died while the driver ran' ;;
        startup-failed) printf 'a service did not start' ;;
        driver-failed) printf 'the driver failed' ;;
        signal) printf 'it was killed by a signal' ;;
        driver-killed) printf 'the driver was killed by a signal (out of memory?)' ;;
        *) printf 'it ended without a record (node lost?)' ;;
    esac
}

# Stop the chain: record why, and take back a successor queued already (a requeued job has one).
gym_chain_end() {
    local state=$1 why=$2 pending
    gym_chain end "$state" "$why"
    gym_log "resume: the chain ends ($state): $why"
    pending=$(gym_successor_of "$GYM_JOB_ID")
    [ -z "$pending" ] || scancel "$pending" 2>/dev/null
    return 1
}

# Judge job $1 (the one before this, or this job's own earlier attempt, whose state dir is $3)
# by its outcome $2 and append the verdict. Returns 1 when the chain must stop.
gym_judge() {
    local prev=$1 outcome=$2 dir=$3 elapsed rollouts before progress action retries spent why
    elapsed=$(gym_job_elapsed "$prev" "$dir")
    rollouts=$(gym_rollouts_now)
    before=$(gym_chain_value start "$prev" 4)
    progress=$((rollouts - ${before:-0}))
    action=$(gym_resume_action "$outcome" "$progress")
    why="$(gym_outcome_text "$outcome") after ${elapsed}s, $progress new rollout(s)"
    gym_chain verdict "$prev" "$outcome" "$elapsed" "$rollouts" "$action" "$why"
    gym_log "resume: job $prev: $why -> $action"
    if [ "$action" = stop ]; then
        case "$outcome" in
            succeeded) gym_chain_end succeeded "job $prev finished" ;;
            cancelled) gym_chain_end cancelled "job $prev was cancelled" ;;
            *) gym_chain_end failed "not resumed: $(gym_outcome_text "$outcome") in job $prev, and a rerun would fail the same way" ;;
        esac
        return 1
    fi
    retries=$(gym_chain_count verdict retry)
    if [ "$retries" -gt "$GYM_MAX_RETRIES" ]; then
        gym_chain_end failed "gave up: $retries resumes without progress or after failures (max_retries $GYM_MAX_RETRIES); last: $why"
        return 1
    fi
    spent=$(awk -F'\t' '$1 == "verdict" {s += $4} END {print s + 0}' "$GYM_CHAIN_FILE")
    if [ "$GYM_MAX_WALLTIME_SECONDS" -gt 0 ] && [ "$spent" -ge "$GYM_MAX_WALLTIME_SECONDS" ]; then
        gym_chain_end "timed out" "max_walltime $GYM_MAX_WALLTIME reached: the chain's jobs ran ${spent}s together"
        return 1
    fi
    if [ "$(gym_chain_count start)" -ge "$GYM_CHAIN_LIMIT" ]; then
        gym_chain_end failed "gave up: the chain reached $GYM_CHAIN_LIMIT jobs"
        return 1
    fi
    return 0
}

# Called when this job fails: a failure a rerun would repeat ends the chain here, so that the
# successor does not wait in the queue (and then take an allocation) only to stop.
gym_resume_finish() {
    local cause=$1 detail=$2 started
    case "$cause" in
        startup-failed | driver-failed) ;;
        *) return 0 ;;
    esac
    started=$(gym_chain_value start "$GYM_JOB_ID" 3)
    gym_chain verdict "$GYM_JOB_ID" "$cause" "$(($(date +%s) - ${started:-$(date +%s)}))" "$(gym_rollouts_now)" stop \
        "$(gym_outcome_text "$cause")"
    gym_chain_end failed "$detail; not resumed: a rerun would fail the same way"
    return 0
}

# Queue the job that resumes this one if it ends badly (not twice: a requeued job has one already).
gym_queue_successor() {
    local out id err
    [ -z "$(gym_successor_of "$GYM_JOB_ID")" ] || return 0
    err=$(mktemp)
    # --parsable prints "id[;cluster]" as its last line; sites' submit plugins may say more.
    out=$(sbatch --parsable --dependency="afternotok:$GYM_JOB_ID" --kill-on-invalid-dep=yes \
        "$GYM_JOB_DIR/job.sh" "$GYM_JOB_ID" 2>"$err")
    id=$(printf '%s\n' "$out" | tail -n 1)
    id=${id%%;*}
    if [[ "$id" =~ ^[0-9]+$ ]]; then
        gym_chain successor "$id" "$GYM_JOB_ID"
        gym_log "resume: job $id is queued to resume this one if it is cut short"
    else
        out=$(cat - "$err" <<<"$out" | tr '\n\t' '  ')
        gym_chain nosuccessor "$GYM_JOB_ID" "sbatch refused the resume job: $out"
        gym_log "WARNING: could not queue the resume job, this job will not be resumed: $out"
    fi
    rm -f "$err"
}

# The chain's bookkeeping before any work. $1: the job this one resumes (empty for the first);
# $2: N > 0 when Slurm requeued this very job (its attempt N is kept in .gym/<id>.attempt-N).
# Returns 1 when this job must not run.
gym_resume_begin() {
    local prev=$1 requeued=$2
    mkdir -p "$GYM_JOB_DIR/.gym"
    if [ "$(gym_chain_count end)" -gt 0 ]; then
        gym_log "resume: the chain has ended already; nothing to do"
        return 1
    fi
    if [ -e "$GYM_JOB_DIR/.gym/cancelled" ]; then
        gym_chain_end cancelled "cancelled by the user (gym eval cancel)"
        return 1
    fi
    if [ "$requeued" -gt 0 ] && [ "$(gym_chain_latest)" != "$GYM_JOB_ID" ]; then
        # Requeued after the chain moved on (an admin's requeue of a job already resumed): the
        # chain's current job owns the directory.
        gym_log "resume: job $GYM_JOB_ID was requeued, but job $(gym_chain_latest) has resumed it already; not running twice"
        return 1
    elif [ "$requeued" -gt 0 ]; then
        gym_judge "$GYM_JOB_ID" requeued "$(gym_state_dir).attempt-$requeued" || return 1
    elif [ -n "$prev" ]; then
        if [ "$(gym_successor_of "$prev")" != "$GYM_JOB_ID" ]; then
            gym_log "resume: job $GYM_JOB_ID is not the recorded successor of job $prev; not running twice"
            return 1
        fi
        gym_judge "$prev" "$(gym_job_outcome "$prev")" "$GYM_JOB_DIR/.gym/$prev" || return 1
    fi
    gym_chain start "$GYM_JOB_ID" "$(date +%s)" "$(gym_rollouts_now)"
    gym_queue_successor
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
