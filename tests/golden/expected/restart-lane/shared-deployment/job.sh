#!/bin/bash
#SBATCH --job-name=gym-shared-deployment
#SBATCH --account=acct
#SBATCH --chdir=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment
#SBATCH --output=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment/slurm-%j.out
#SBATCH --partition=batch
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
# gym orchestration: benchmark shared-deployment of run gym-job-20260101T000000Z-000000, slurm backend, container runtime pyxis.
# Services start first, are health-checked, then the driver runs while every service is watched:
# a service that dies fails the job at once, with its name, exit status and the end of its log.
# shellcheck disable=SC2034  # GYM_STEP_PID and GYM_SERVICE_STEPS are read by steps/lib.sh
set -uo pipefail

GYM_JOB_DIR=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment
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
    [policy-prefill]=policy-prefill
    [policy-decode]=policy-decode
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
    printf '%s\n' GYM_PORT_POLICY_PREFILL=8001 GYM_PORT_POLICY_DECODE=8002 GYM_PORT_POLICY=8000 GYM_PORT_POLICY_PREFILL_NIXL=5600 GYM_PORT_POLICY_DECODE_NIXL=5601 GYM_PORT_POLICY_METRICS=29000 >"$(gym_state_dir)/ports"
elif ! python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.ports claim --state-dir "$(gym_state_dir)" --node "$(gym_this_node)" --job "$GYM_JOB_ID" --pid $$ policy-prefill=8001 policy-decode=8002 policy=8000 policy-prefill_nixl=5600 policy-decode_nixl=5601 policy_metrics=29000 2>"$(gym_state_dir)/ports-why"; then
    gym_finish 1 "no ports for its servers on node $(gym_this_node): $(gym_ports_why "$(gym_state_dir)/ports-why")" startup-failed
fi
gym_read_ports "$(gym_state_dir)/ports"
gym_log "ports on $(gym_this_node): policy-prefill=${GYM_PORT_POLICY_PREFILL} policy-decode=${GYM_PORT_POLICY_DECODE} policy=${GYM_PORT_POLICY} policy-prefill_nixl=${GYM_PORT_POLICY_PREFILL_NIXL} policy-decode_nixl=${GYM_PORT_POLICY_DECODE_NIXL} policy_metrics=${GYM_PORT_POLICY_METRICS}"

# Where each model service answers, wherever it runs: for the driver, a command, the other services.
GYM_SERVICE_URL_POLICY_PREFILL="http://$(gym_node_ip "$(gym_node_name 0)"):${GYM_PORT_POLICY_PREFILL}/v1"
export GYM_SERVICE_URL_POLICY_PREFILL
GYM_SERVICE_URL_POLICY_DECODE="http://$(gym_node_ip "$(gym_node_name 0)"):${GYM_PORT_POLICY_DECODE}/v1"
export GYM_SERVICE_URL_POLICY_DECODE
GYM_SERVICE_URL_POLICY="http://$(gym_node_ip "$(gym_node_name 0)"):${GYM_PORT_POLICY}/v1"
export GYM_SERVICE_URL_POLICY

# service policy-prefill, step policy-prefill: one process, nodes 0..0
srun --overlap --nodes=1 --ntasks=1 --ntasks-per-node=1 --nodelist="$(gym_node_list 0 1)" --output=logs/policy-prefill-"$GYM_JOB_ID".log --container-image=vllm/vllm-openai:v0.11.0 --container-mounts=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment:/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment --no-container-mount-home --container-workdir=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment bash /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment/steps/policy-prefill.sh &
GYM_STEP_PID[policy-prefill]=$!
gym_event "launched policy-prefill"

# service policy-decode, step policy-decode: one process, nodes 0..0
srun --overlap --nodes=1 --ntasks=1 --ntasks-per-node=1 --nodelist="$(gym_node_list 0 1)" --output=logs/policy-decode-"$GYM_JOB_ID".log --container-image=vllm/vllm-openai:v0.11.0 --container-mounts=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment:/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment --no-container-mount-home --container-workdir=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment bash /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment/steps/policy-decode.sh &
GYM_STEP_PID[policy-decode]=$!
gym_event "launched policy-decode"

# service policy, step policy: vllm-router in front of 1 prefill and 1 decode server(s), nodes 0..0
srun --overlap --nodes=1 --ntasks=1 --ntasks-per-node=1 --nodelist="$(gym_node_list 0 1)" --output=logs/policy-"$GYM_JOB_ID".log --container-image=vllm/vllm-openai:v0.11.0 --container-mounts=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment:/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment --no-container-mount-home --container-workdir=/lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment bash /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment/steps/policy.sh &
GYM_STEP_PID[policy]=$!
gym_event "launched policy"

gym_wait_http policy-prefill "http://$(gym_node_name 0):${GYM_PORT_POLICY_PREFILL}/health" 60 gym-job-20260101T000000Z-000000-shared-deployment-policy-prefill || gym_finish 1 "service policy-prefill did not start" startup-failed

gym_wait_http policy-decode "http://$(gym_node_name 0):${GYM_PORT_POLICY_DECODE}/health" 60 gym-job-20260101T000000Z-000000-shared-deployment-policy-decode || gym_finish 1 "service policy-decode did not start" startup-failed

gym_wait_http policy "http://$(gym_node_name 0):${GYM_PORT_POLICY}/health" 60 || gym_finish 1 "service policy did not start" startup-failed

# Shared deployment: every benchmark's driver against these services, 1 at a time.
# Each benchmark keeps its own directory, log and state; one failing does not stop the others.
# Which driver starts when, when the next run's weights are loaded and what fails with what is
# shared_queue.py's to decide: this shell does what it answers, and tells it what came of it.
declare -A GYM_BENCH_DIR=(
    [a]=/lustre/runs/gym-job-20260101T000000Z-000000/a
    [b]=/lustre/runs/gym-job-20260101T000000Z-000000/b
)
# Each driver's gym binds a head server of its own, on a port claimed as that driver starts
# (ports.py), owned by the shell that launches it: given back when the driver ends, since drivers
# start and end at their own times.
gym_claim_driver_ports() {
    local dir=${GYM_BENCH_DIR[$1]}/.gym/$GYM_JOB_ID
    mkdir -p "$dir" || return 1
    if ! python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.ports claim --state-dir "$dir" --node "$(gym_this_node)" --job "$GYM_JOB_ID" --pid "$BASHPID" gym_head_server=11000 2>"$dir/ports-why"; then
        gym_log "no port for the driver of $1 on node $(gym_this_node): $(gym_ports_why "$dir/ports-why")"
        return 1
    fi
    gym_read_ports "$dir/ports"
}
gym_launch_driver() {
    gym_claim_driver_ports "$1" || return 1
    case "$1" in
        a) GYM_JOB_DIR=/lustre/runs/gym-job-20260101T000000Z-000000/a srun --overlap --nodes=1 --ntasks=1 --ntasks-per-node=1 --nodelist="$(gym_node_list 0 1)" --output=/lustre/runs/gym-job-20260101T000000Z-000000/a/logs/driver-"$GYM_JOB_ID".log --container-image=python:3.12 --container-mounts=/lustre/runs/gym-job-20260101T000000Z-000000/a:/lustre/runs/gym-job-20260101T000000Z-000000/a --no-container-mount-home --container-workdir=/lustre/runs/gym-job-20260101T000000Z-000000/a bash /lustre/runs/gym-job-20260101T000000Z-000000/a/steps/driver.sh ;;
        b) GYM_JOB_DIR=/lustre/runs/gym-job-20260101T000000Z-000000/b srun --overlap --nodes=1 --ntasks=1 --ntasks-per-node=1 --nodelist="$(gym_node_list 0 1)" --output=/lustre/runs/gym-job-20260101T000000Z-000000/b/logs/driver-"$GYM_JOB_ID".log --container-image=python:3.12 --container-mounts=/lustre/runs/gym-job-20260101T000000Z-000000/b:/lustre/runs/gym-job-20260101T000000Z-000000/b --no-container-mount-home --container-workdir=/lustre/runs/gym-job-20260101T000000Z-000000/b bash /lustre/runs/gym-job-20260101T000000Z-000000/b/steps/driver.sh ;;
    esac
}
gym_bench_phase() {
    local dir=${GYM_BENCH_DIR[$1]}/.gym/$GYM_JOB_ID
    mkdir -p "$dir" && gym_write_state "$dir" "$2" "$3"
}
# gym eval cancel of some of the runs this job serves writes their benchmarks' cancel markers and
# leaves the job running: each one seen is told to shared_queue.py once (its drivers still to end).
gym_look_for_cancels() {
    local bench
    for bench in "${!gym_watched[@]}"; do
        [ -e "${GYM_BENCH_DIR[$bench]}/.gym/$GYM_JOB_ID/cancelled" ] || continue
        gym_events+=(cancelled "$bench")
        unset 'gym_watched[$bench]'
    done
}
# Stops one driver ($1: its launching shell's pid; $2: the signal, TERM unless given): started
# from a function, it runs one level down (in a process group of its own under the local backend).
# Its launching shell is left to exit with it, so that its end is the driver's own (in a warm lane
# the next weights wait for it).
gym_stop_driver() {
    local child children signal=${2:-TERM}
    children=$(pgrep -P "$1" 2>/dev/null)
    for child in ${children:-$1}; do
        kill "-$signal" -- "-$child" 2>/dev/null || kill "-$signal" "$child" 2>/dev/null
    done
}
# A restart lane (its policy's weights cannot be switched in place): each run after the first is
# served by its own deployment, started here once the run before has been served. Returns 0 once
# turn $1's services serve; else 1, why in weights-why, its services stopped and watched no more.
gym_start_turn() {
    local step steps
    read -r -a steps <<<"${GYM_SERVICE_STEPS[*]}"
    gym_stop_steps "${steps[@]}"
    for step in "${steps[@]}"; do unset 'GYM_STEP_PID[$step]'; done
    GYM_SERVICE_STEPS=()
    export GYM_PORT_WAIT_SECONDS=60
    case "$1" in
        *) return 1 ;;
    esac
}
# The switch to turn $1 (its benchmarks after it): its deployment started and its weights recorded,
# or contract.Reload's NOT_STARTED for shared_queue.py (the next turn starts its own).
gym_switch_turn() {
    local steps
    : >"$(gym_state_dir)/weights-why"
    gym_log "starting the deployment anew on ${GYM_WEIGHTS[$1]} (turn $1 of the lane)"
    gym_start_turn "$1" && {
        gym_weights started "$@"
        return
    }
    read -r -a steps <<<"${GYM_SERVICE_STEPS[*]}"
    gym_stop_steps "${steps[@]}"
    GYM_SERVICE_STEPS=()
    return 5
}
# A lane: each run's benchmarks are answered by its own checkpoint's weights, started anew.
# weights.py checks and records each switch (VERB TURN BENCHMARK...: those benchmarks'
# provenance); its exit status goes back to shared_queue.py.
GYM_WEIGHTS=( /ckpt/step-100 )
gym_weights() {
    local verb=$1 turn=$2 bench dirs=()
    for bench in "${@:3}"; do dirs+=("${GYM_BENCH_DIR[$bench]}"); done
    python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.weights "$verb" --weights "${GYM_WEIGHTS[$turn]}" --loaded .gym/loaded-weights.json \
        "${dirs[@]}" 2>"$(gym_state_dir)/weights-why"
}
# Whether these running drivers have written every row they expect (weights.py decides): then they
# ask the server nothing more, and the next run's weights may be loaded while they wind down (gym
# writes its metrics and stops its own servers for seconds after its last request).
gym_answered() {
    local bench dirs=()
    for bench in "$@"; do dirs+=("${GYM_BENCH_DIR[$bench]}"); done
    python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.weights answered "${dirs[@]}" 2>/dev/null
}
# One action of shared_queue.py's answer: its verb, then its words.
gym_act() {
    local bench
    case "$1" in
        phase) gym_bench_phase "$2" "$3" "$4" ;;
        launch)
            gym_launch_driver "$2" &
            gym_running[$2]=$!
            GYM_STEP_PID["driver-$2"]=$!
            gym_event "driver-start $2"
            ;;
        ask-answered) gym_asking=("${@:2}") ;; # asked each tick until they have
        reload)
            gym_event "reload $2"
            gym_switch_turn "${@:2}"
            gym_told+=(reloaded "$2" "$?" "$(gym_state_dir)/weights-why")
            ;;
        log) gym_log "$2" ;;
        stop)
            gym_log "stopping the driver of $2: cancelled (gym eval cancel)"
            gym_stopped[$2]=$SECONDS
            gym_stop_driver "${gym_running[$2]}"
            ;;
        kill-drivers) for bench in "${!gym_running[@]}"; do kill -TERM "${gym_running[$bench]}" 2>/dev/null; done ;;
        wait) wait ;;
        finish) gym_finish "$2" "$3" "${4:-}" ;;
        *) gym_finish 1 "shared_queue.py asked for '$1', which this job does not do" startup-failed ;;
    esac
}
# Asks shared_queue.py (start ..., or step and the events since its last call) and does what it
# answers; asks again at once with what that brought about (a reload's outcome), until nothing did.
gym_decide() {
    local answer line words actions
    while [ $# -gt 0 ]; do
        answer=$(python3 -E -s "$GYM_JOB_DIR"/steps/py/gym_run.py nemo_gym.orchestration.shared_queue "$(gym_state_dir)/shared-queue.json" "$@") ||
            gym_finish 1 "the shared deployment's queue was not decided (python3 on this node?)" startup-failed
        set --
        gym_asking=()
        mapfile -t actions <<<"$answer"
        for line in "${actions[@]}"; do
            [ -n "$line" ] || continue
            IFS=$'\t' read -r -a words <<<"$line"
            gym_act "${words[@]}"
        done
        [ ${#gym_told[@]} -eq 0 ] || set -- step "${gym_told[@]}"
        gym_told=()
    done
}
declare -A gym_running=() gym_stopped=() gym_watched=()
gym_asking=()
gym_told=()
gym_events=()
for gym_bench in "${!GYM_BENCH_DIR[@]}"; do
    gym_dir=${GYM_BENCH_DIR[$gym_bench]}
    # Its directories, and where its driver's step records its exit (as the job's own state has).
    mkdir -p "$gym_dir/logs" "$gym_dir/artifacts" "$gym_dir/.gym/$GYM_JOB_ID/exit"
    gym_watched[$gym_bench]=1
done
gym_decide start 1 a 0 b 0
gym_weights started 0 a b || gym_log "WARNING: the starting weights could not be recorded"
gym_phase running "benchmarks"
# A run cancelled before the job started is never launched.
gym_look_for_cancels
gym_decide step ${gym_events[@]+"${gym_events[@]}"}
gym_events=()
# Each tick: which benchmarks were cancelled, whether the drivers asked about have answered, whether a service died, which
# drivers ended; told to shared_queue.py when anything happened. It ends the job (its last answer)
# once none is left.
while :; do
    gym_look_for_cancels
    if [ ${#gym_asking[@]} -gt 0 ] && gym_answered "${gym_asking[@]}"; then
        for bench in "${gym_asking[@]}"; do gym_events+=(answered "$bench"); done
    fi
    for service in "${!GYM_SERVICE_STEPS[@]}"; do
        # Every driver fails with it, running or not: the job ends with this answer.
        gym_check_alive "$service" || gym_decide step died "$service"
    done
    for bench in "${!gym_running[@]}"; do
        pid=${gym_running[$bench]}
        if kill -0 "$pid" 2>/dev/null; then
            # A driver stopped (cancelled) that outlives its TERM by 15 s is killed, as
            # gym_stop_steps does: the queue waits for its end.
            [ -z "${gym_stopped[$bench]:-}" ] || [ $((SECONDS - gym_stopped[$bench])) -le 15 ] || gym_stop_driver "$pid" KILL
            continue
        fi
        wait "$pid"
        rc=$?
        unset 'gym_running[$bench]' 'gym_watched[$bench]'
        gym_event "driver-end $bench $rc"
        gym_events+=(ended "$bench" "$rc")
    done
    if [ ${#gym_events[@]} -gt 0 ]; then
        gym_decide step "${gym_events[@]}"
        gym_events=()
    fi
    sleep 1
done
