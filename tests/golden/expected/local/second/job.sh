#!/bin/bash
# gym orchestration: benchmark second of run gym-job-20260101T000000Z-000000, local backend, container runtime none.
# Services start first, are health-checked, then the driver runs while every service is watched:
# a service that dies fails the job at once, with its name, exit status and the end of its log.
# shellcheck disable=SC2034  # GYM_STEP_PID and GYM_SERVICE_STEPS are read by steps/lib.sh
set -uo pipefail

GYM_JOB_DIR=/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second
GYM_JOB_ID=${GYM_JOB_ID:?the local runner sets GYM_JOB_ID}
GYM_NODES=$(hostname)
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

# Why this job is being ended: only a cancel can be told here (gym eval cancel's marker).
gym_ending_cause() {
    if [ -e "$(gym_state_dir)/cancelled" ]; then
        printf 'cancelled'
    fi
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
    if [ "$rc" -eq 0 ]; then
        gym_phase succeeded "$detail"
    elif [ "$cause" = disk-full ] || ! grep -q '^phase=failed' "$(gym_state_dir)/state" 2>/dev/null; then
        gym_phase failed "$detail"
    fi
    gym_log "job finished with status $rc${detail:+: $detail}"
    gym_event "job-end $rc"
    exit "$rc"
}
trap 'gym_finish 143 "stopped by a signal (SIGTERM)" signal' TERM
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

# Each server's port is claimed on this node now (ports.py): the preferred one when it is free and
# no other live job holds it, else the next free one; every consumer reads it from $GYM_PORT_<NAME>,
# and the job gives them back when it ends. A node without python3 keeps the configured ports (a
# port another job holds then fails its step, named).
if ! command -v python3 >/dev/null 2>&1; then
    gym_log "WARNING: no python3 on node $(gym_this_node): its servers keep their configured ports"
    printf '%s\n' GYM_PORT_POLICY=18000 GYM_PORT_GYM_HEAD_SERVER=11000 >"$(gym_state_dir)/ports"
elif ! python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.ports claim --state-dir "$(gym_state_dir)" --node "$(gym_this_node)" --job "$GYM_JOB_ID" --pid $$ policy=18000 gym_head_server=11000 2>"$(gym_state_dir)/ports-why"; then
    gym_finish 1 "no ports for its servers on node $(gym_this_node): $(gym_ports_why "$(gym_state_dir)/ports-why")" startup-failed
fi
gym_read_ports "$(gym_state_dir)/ports"
gym_log "ports on $(gym_this_node): policy=${GYM_PORT_POLICY} gym_head_server=${GYM_PORT_GYM_HEAD_SERVER}"

# Where each model service answers, wherever it runs: for the driver, a command, the other services.
GYM_SERVICE_URL_POLICY="http://$(gym_node_ip "$(gym_node_name 0)"):${GYM_PORT_POLICY}/v1"
export GYM_SERVICE_URL_POLICY

# service policy, step policy: one process, nodes 0..0
setsid bash /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/steps/policy.sh >"logs/policy-$GYM_JOB_ID.log" 2>&1 &
GYM_STEP_PID[policy]=$!
gym_event "launched policy"

gym_wait_http policy "http://localhost:${GYM_PORT_POLICY}/health" 60 gym-job-20260101T000000Z-000000-second-policy || gym_finish 1 "service policy did not start" startup-failed

# Driver: gym eval run, watched together with the services.
gym_phase running "driver"
setsid bash /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/steps/driver.sh >"logs/driver-$GYM_JOB_ID.log" 2>&1 &
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
