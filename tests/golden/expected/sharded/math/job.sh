#!/bin/bash
#SBATCH --job-name=gym-math
#SBATCH --account=acct
#SBATCH --chdir=/lustre/runs/gym-job-20260101T000000Z-000000/math
#SBATCH --output=/lustre/runs/gym-job-20260101T000000Z-000000/math/slurm-%j.out
#SBATCH --partition=batch
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
# gym orchestration: benchmark math of run gym-job-20260101T000000Z-000000, slurm backend, container runtime pyxis.
# Services start first, are health-checked, then the driver runs while every service is watched:
# a service that dies fails the job at once, with its name, exit status and the end of its log.
# shellcheck disable=SC2034  # GYM_STEP_PID and GYM_SERVICE_STEPS are read by steps/lib.sh
set -uo pipefail

GYM_JOB_DIR=/lustre/runs/gym-job-20260101T000000Z-000000/math
# A task of a job array (slurm-array.sh.j2) is known by its ARRAY_TASK id, which the array's
# script passes; not passed on to the jobs this one queues.
GYM_JOB_ID=${GYM_ARRAY_TASK_JOB_ID:-${SLURM_JOB_ID:?this script runs under sbatch}}
unset GYM_ARRAY_TASK_JOB_ID
GYM_NODES=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)
export GYM_JOB_DIR GYM_JOB_ID GYM_NODES
cd "$GYM_JOB_DIR" || exit 1
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_requeued=0
if [ -e "$(gym_state_dir)/pid" ]; then
    # Slurm requeued this job (a node failed, or it was preempted): same id, a fresh start. The
    # earlier run's markers must not read as this run's deaths; keep them beside it, numbered by
    # the requeue that ended it (the first free number: this is that many requeues in).
    gym_requeued=1
    while [ -e "$(gym_state_dir).attempt-$gym_requeued" ]; do gym_requeued=$((gym_requeued + 1)); done
    mv "$(gym_state_dir)" "$(gym_state_dir).attempt-$gym_requeued"
fi
GYM_ATTEMPT=$gym_requeued
gym_feed_lane() {
    local gym_feeder=''
    { IFS= read -r gym_feeder && IFS= read -r gym_feeder; } 2>/dev/null <"$GYM_JOB_DIR/.gym/lane-next" || return 0
    if ! command -v python3 >/dev/null 2>&1; then
        gym_log "WARNING: no python3 on this node: the next job of this lane is not queued (gym eval resubmit queues it)"
        return 0
    fi
    python3 -E -s "$gym_feeder"/steps/py/gym_run.py nemo_gym.orchestration.lane_feed --scheduler slurm_node || gym_log "WARNING: the lane feeder failed (exit status $?)"
}
gym_feed_lane
mkdir -p logs artifacts "$(gym_state_dir)/exit" "$(gym_state_dir)/ready" "$(gym_state_dir)/why"
if [ -e "$GYM_JOB_DIR/.gym/cancelled" ]; then
    # Cancelled before it started (a lane's job queued as gym eval cancel ran): nothing to run.
    gym_phase cancelled "cancelled before it started"
    exit 0
fi
# As NeMo Gym 0.7.0's jobs do: configs name the allocation's first node by it (policy_host: ${oc.env:HEAD_NODE_IP}).
HEAD_NODE_IP=$(gym_node_ip "$(gym_node_name 0)")
export HEAD_NODE_IP
gym_log "job $GYM_JOB_ID on nodes $GYM_NODES"
gym_event "job-start"
echo "$$" >"$(gym_state_dir)/pid"
head -c 65536 /dev/zero >"$(gym_state_dir)/reserve" 2>/dev/null || :

declare -A GYM_STEP_PID=()
declare -A GYM_SERVICE_STEPS=(
    [policy]=policy
)

# Why this job is being ended, if it is: cancelled (by gym eval cancel, whose marker comes before
# its scancel), walltime or preempted (Slurm's word); nothing when it cannot be told. A walltime, a
# preemption and a scancel all arrive as the same TERM, while Slurm shows the job as COMPLETING;
# its Reason still says TimeLimit after a walltime, its PreemptTime is set after a preemption.
gym_ending_cause() {
    local line
    if [ -e "$GYM_JOB_DIR/.gym/cancelled" ] || [ -e "$(gym_state_dir)/cancelled" ]; then
        printf 'cancelled'
        return 0
    fi
    line=$(scontrol show job -o "$GYM_JOB_ID" 2>/dev/null)
    case "$line" in
        *" JobState=TIMEOUT "* | *" JobState=DEADLINE "* | *" Reason=TimeLimit "*) printf 'walltime' ;;
        *" JobState=PREEMPTED "* | *" PreemptTime="[0-9]*) printf 'preempted' ;;
        *" JobState=CANCELLED "*) printf 'cancelled' ;;
    esac
}

# Export a benchmark's results ($1: its state, $2: its directory) with the stdlib exporters staged
# in it. Once each; a failure is recorded in its receipt and never changes the benchmark's state.
gym_export() {
    gym_log "exporting the results of $(basename "$2")"
    python3 -E -s "$2"/steps/py/gym_run.py nemo_gym.orchestration.exporters.run_exports "$2" --job-id "$GYM_JOB_ID" --state "$1" ||
        gym_log "WARNING: the exports could not run here (python3 on this node?); gym eval export runs them later"
}

# Ends the job. A failure also records its cause, which a resumable job's successor reads when the
# scheduler has forgotten the job:
# startup-failed, service-died, driver-failed, driver-killed, walltime, preempted, cancelled, signal, cut-short, disk-full, weights-failed.
gym_finish() {
    local rc=$1 detail=$2 cause=${3:-} ending full
    trap - TERM INT
    # Recorded at once (a step's death may already have said failed), then told better below.
    [ "$rc" -eq 0 ] || [ -z "$cause" ] || printf '%s\n' "$cause" >"$(gym_state_dir)/cause"
    case "$cause" in
        startup-failed | service-died | driver-failed | driver-killed)
            # Steps get the scheduler's TERM too, and may die of it before this shell hears it.
            ending=$(gym_ending_cause)
            cause=${ending:-$cause}
            ;;
    esac
    case "$cause" in
        walltime | preempted | cancelled) ;;
        *)
            # Whatever failed first, a full filesystem is why: a rerun fails so until space is freed.
            if [ "$rc" -ne 0 ] && full=$(gym_disk_full); then
                detail="$full; free space there, then gym eval resubmit"
                cause=disk-full
                gym_log "ERROR: $full"
            fi
            ;;
    esac
    [ "$rc" -eq 0 ] || [ -z "$cause" ] || printf '%s\n' "$cause" >"$(gym_state_dir)/cause"
    gym_stop_collector
    gym_stop_steps
    # Its servers have stopped: their ports go back to the node.
    python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.ports release --node "$(gym_this_node)" --job "$GYM_JOB_ID" 2>/dev/null || :
    [ -z "${GYM_HEARTBEAT_PID:-}" ] || kill "$GYM_HEARTBEAT_PID" 2>/dev/null
    case "$cause" in
        "" | driver-failed | driver-killed | service-died)
            # Results leave the cluster once the driver has ended, before the job says it ended (so a
            # watcher sees the exports' outcome). A job stopped by its walltime, a
            # preemption or a cancel does not export: its successor does, or gym eval export.
            gym_export "$([ "$rc" -eq 0 ] && echo succeeded || echo failed)" "$GYM_JOB_DIR"
            ;;
    esac
    if [ "$rc" -eq 0 ]; then
        gym_phase succeeded "$detail"
    elif [ "$cause" = disk-full ] || ! grep -q '^phase=failed' "$(gym_state_dir)/state" 2>/dev/null; then
        gym_phase failed "$detail"
    fi
    gym_log "job finished with status $rc${detail:+: $detail}"
    gym_event "job-end $rc"
    exit "$rc"
}
# Slurm's TERM, with the reason when it can be told.
# shellcheck disable=SC2317  # run by the TERM trap
gym_on_term() {
    local cause
    cause=$(gym_ending_cause)
    case "$cause" in
        walltime) gym_finish 143 "stopped by its walltime (SIGTERM)" walltime ;;
        preempted) gym_finish 143 "preempted (SIGTERM)" preempted ;;
        cancelled) gym_finish 143 "cancelled (SIGTERM)" cancelled ;;
        *) gym_finish 143 "stopped by a signal (SIGTERM)" signal ;;
    esac
}
trap gym_on_term TERM
trap 'gym_finish 130 "interrupted" signal' INT
gym_phase starting "launching services"

# Reads ports.py's answer ($1) as data, never runs it: a name of ours and a number, each line.
gym_read_ports() {
    local gym_name gym_port
    while IFS='=' read -r gym_name gym_port; do
        [[ $gym_name =~ ^GYM_PORT_[A-Z0-9_]+$ && $gym_port =~ ^[0-9]{1,5}$ ]] && export "$gym_name=$gym_port"
    done <"$1"
}
# Why ports.py found none ($1: its stderr), as one short printable line.
gym_ports_why() {
    tail -n 1 "$1" | head -c 300 | tr -cd '[:print:]'
}

# nodes shared (auto): it needs one node, and its servers' ports are claimed when it starts.
# Each server's port is claimed on this node now (ports.py): the preferred one when it is free and
# no other live job holds it, else the next free one; every consumer reads it from $GYM_PORT_<NAME>,
# and the job gives them back when it ends. A node without python3 keeps the configured ports (a
# port another job holds then fails its step, named).
if ! command -v python3 >/dev/null 2>&1; then
    gym_log "WARNING: no python3 on node $(gym_this_node): its servers keep their configured ports"
    printf '%s\n' GYM_PORT_POLICY=8000 GYM_PORT_GYM_HEAD_SERVER=11000 >"$(gym_state_dir)/ports"
elif ! python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.ports claim --state-dir "$(gym_state_dir)" --node "$(gym_this_node)" --job "$GYM_JOB_ID" --pid $$ policy=8000 gym_head_server=11000 2>"$(gym_state_dir)/ports-why"; then
    gym_finish 1 "no ports for its servers on node $(gym_this_node): $(gym_ports_why "$(gym_state_dir)/ports-why")" startup-failed
fi
gym_read_ports "$(gym_state_dir)/ports"
gym_log "ports on $(gym_this_node): policy=${GYM_PORT_POLICY} gym_head_server=${GYM_PORT_GYM_HEAD_SERVER}"

# Where each model service answers, wherever it runs: for the driver, a command, the other services.
GYM_SERVICE_URL_POLICY="http://$(gym_node_ip "$(gym_node_name 0)"):${GYM_PORT_POLICY}/v1"
export GYM_SERVICE_URL_POLICY

# service policy, step policy: one process, nodes 0..0
srun --overlap --nodes=1 --ntasks=1 --ntasks-per-node=1 --nodelist="$(gym_node_list 0 1)" --output=logs/policy-"$GYM_JOB_ID".log --container-image=vllm:latest --container-mounts=/lustre/runs/gym-job-20260101T000000Z-000000/math:/lustre/runs/gym-job-20260101T000000Z-000000/math --no-container-mount-home --container-workdir=/lustre/runs/gym-job-20260101T000000Z-000000/math bash /lustre/runs/gym-job-20260101T000000Z-000000/math/steps/policy.sh &
GYM_STEP_PID[policy]=$!
gym_event "launched policy"

gym_wait_http policy "http://$(gym_node_name 0):${GYM_PORT_POLICY}/health" 60 gym-job-20260101T000000Z-000000-math-policy || gym_finish 1 "service policy did not start" startup-failed

# Driver: gym eval run, watched together with the services.
gym_phase running "driver"
srun --overlap --nodes=1 --ntasks=1 --ntasks-per-node=1 --nodelist="$(gym_node_list 0 1)" --output=logs/driver-"$GYM_JOB_ID".log --container-image=python:3.12 --container-mounts=/lustre/runs/gym-job-20260101T000000Z-000000/math:/lustre/runs/gym-job-20260101T000000Z-000000/math --no-container-mount-home --container-workdir=/lustre/runs/gym-job-20260101T000000Z-000000/math bash /lustre/runs/gym-job-20260101T000000Z-000000/math/steps/driver.sh &
GYM_DRIVER_PID=$!
# Stopped with the steps when the job ends early (a local driver is a process group of its own).
GYM_STEP_PID[driver]=$GYM_DRIVER_PID
gym_event "driver-start"
while kill -0 "$GYM_DRIVER_PID" 2>/dev/null; do
    for service in "${!GYM_SERVICE_STEPS[@]}"; do
        if ! gym_check_alive "$service"; then
            kill -TERM "$GYM_DRIVER_PID" 2>/dev/null
            wait "$GYM_DRIVER_PID" 2>/dev/null
            gym_finish 1 "service $service died while the driver ran" service-died
        fi
    done
    sleep 1
done
wait "$GYM_DRIVER_PID"
driver_rc=$?
gym_event "driver-end $driver_rc"
# A service that died between two looks of the watch still makes the results suspect (the driver
# may have talked to something else on that port): check every service once more.
for service in "${!GYM_SERVICE_STEPS[@]}"; do
    gym_check_alive "$service" || gym_finish 1 "service $service died while the driver ran" service-died
done
if [ "$driver_rc" -ne 0 ]; then
    gym_log "ERROR: the driver failed with exit status $driver_rc; last lines of its log:"
    tail -n 20 "logs/driver-$GYM_JOB_ID.log" 2>/dev/null | sed 's/^/    /'
    if [ "$driver_rc" -gt 128 ]; then
        # Killed by a signal (the OOM killer's KILL, a node going down): not its own failure.
        gym_finish "$driver_rc" "the driver was killed by signal $((driver_rc - 128))" driver-killed
    fi
    gym_finish "$driver_rc" "driver failed with exit status $driver_rc" driver-failed
fi
gym_finish 0 "driver finished"
