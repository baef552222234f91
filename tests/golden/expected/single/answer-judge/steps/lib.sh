# shellcheck shell=bash
# Functions shared by the job script and its steps (sourced, never run on its own).
# Rendered by gym orchestration for run gym-job-20260101T000000Z-000000.

# Where this job keeps its markers: per Slurm job id, so a requeued job starts clean.
gym_state_dir() {
    printf '%s/.gym/%s' "$GYM_JOB_DIR" "$GYM_JOB_ID"
}

# Milliseconds since the epoch: the waits below count in whole numbers, in bash.
gym_now_ms() {
    local ns
    ns=$(date +%s%N)
    printf '%s' "$((ns / 1000000))"
}

gym_sleep_ms() {
    sleep "$(($1 / 1000)).$(printf '%03d' "$(($1 % 1000))")"
}

gym_log() {
    printf '[gym %s] %s\n' "$(date -u +%H:%M:%S)" "$*"
}

# A timestamped event (epoch seconds), for benchmarks and post-mortems: <job state>/events.
gym_event() {
    printf '%s %s\n' "$(date +%s.%N)" "$*" >>"$(gym_state_dir)/events"
}

# Whether the filesystem of the job's directory is full (no space, or the quota reached): a 64 KiB
# file cannot be written there. If so the job's reserve is given back, so that what it records next
# fits, and the words naming the filesystem are printed.
gym_disk_full() {
    local probe="$GYM_JOB_DIR/.gym/space-probe.$$" where target
    if head -c 65536 /dev/zero >"$probe" 2>/dev/null; then
        rm -f "$probe"
        return 1
    fi
    rm -f "$probe" "$(gym_state_dir)/reserve"
    # "TARGET  FSTYPE": where it is mounted, and what it is (a Lustre quota, a local disk).
    where=$(df --output=target,fstype "$GYM_JOB_DIR" 2>/dev/null | tail -n 1)
    target=${where% *}
    target=${target%"${target##*[! ]}"}
    printf 'the filesystem holding %s is full (%s at %s)' "$GYM_JOB_DIR" "${where##* }" "${target:-?}"
}

# The job's phase, for `gym eval status`: key=value lines replaced atomically.
gym_phase() {
    gym_write_state "$(gym_state_dir)" "$@"
}

# gym_write_state DIR PHASE [DETAIL]: the state file in DIR (a shared job writes one per benchmark).
gym_write_state() {
    local state tmp
    state="$1/state"
    tmp="$state.$$"
    # A write cut short (a full disk) replaces nothing.
    if ! {
        printf 'phase=%s\n' "$2"
        printf 'detail=%s\n' "${3:-}"
        printf 'time=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        # Which run of this job id wrote it: Slurm counts restarts of a requeued job the same way.
        printf 'attempt=%s\n' "${GYM_ATTEMPT:-0}"
    } >"$tmp"; then
        rm -f "$tmp"
        return 1
    fi
    mv -f "$tmp" "$state"
}

# The hostname of this node as Slurm knows it.
gym_this_node() {
    printf '%s' "${SLURMD_NODENAME:-$(hostname)}"
}

# An IPv4 address for a node name (what vLLM and Ray want to bind and dial).
gym_node_ip() {
    local ip
    read -r ip _ < <(getent ahostsv4 "$1" 2>/dev/null) || :
    printf '%s' "${ip:-$1}"
}

# Comma-separated names of COUNT nodes starting at index START of the allocation.
gym_node_list() {
    local start=$1 count=$2
    local -a nodes
    IFS=, read -r -a nodes <<<"$GYM_NODES"
    local IFS=,
    printf '%s' "${nodes[*]:start:count}"
}

gym_node_name() {
    local -a nodes
    IFS=, read -r -a nodes <<<"$GYM_NODES"
    printf '%s' "${nodes[$1]}"
}

# --- inside a step ------------------------------------------------------------------------------

# Sets GYM_STEP_RANK: this node's position among the step's nodes (0 is the step's head).
gym_step_begin() {
    GYM_STEP_NAME=$1
    local start=$2 count=$3 me i
    me=$(gym_this_node)
    GYM_STEP_RANK=-1
    for ((i = 0; i < count; i++)); do
        if [ "$(gym_node_name $((start + i)))" = "$me" ]; then
            GYM_STEP_RANK=$i
        fi
    done
    if [ "$GYM_STEP_RANK" -lt 0 ]; then
        # Only possible when the allocation has one node per name, i.e. a local run.
        GYM_STEP_RANK=0
    fi
    export GYM_STEP_NAME GYM_STEP_RANK
    # Ray finds "the current cluster" through its temp dir (/tmp/ray): another job's or a stale
    # cluster there would capture this step's Ray (gym's own included). Give each step its own.
    if [ -z "${RAY_TMPDIR:-}" ]; then
        RAY_TMPDIR=$(mktemp -d /tmp/gym-ray-XXXXXX) && export RAY_TMPDIR && GYM_OWN_RAY_TMPDIR=$RAY_TMPDIR
    fi
    # However the step ends (its program exits, a setup command fails, a signal), the job sees it.
    trap 'gym_step_end $?' EXIT
    gym_log "step $GYM_STEP_NAME: node $me, rank $GYM_STEP_RANK of $count"
}

gym_step_end() {
    local rc=$1 marker pids
    marker="$(gym_state_dir)/exit/$GYM_STEP_NAME@$(gym_this_node)"
    [ -e "$marker" ] || printf '%s\n' "$rc" >"$marker"
    # Helpers started in the background (a Ray head under vLLM) end with the step.
    pids=$(jobs -p)
    if [ -n "$pids" ]; then
        # shellcheck disable=SC2086  # one pid per word
        kill $pids 2>/dev/null
    fi
    if [ -n "${GYM_OWN_RAY_TMPDIR:-}" ]; then
        rm -rf "$GYM_OWN_RAY_TMPDIR" 2>/dev/null
    fi
}

# Run a program, forward TERM/INT to it, and leave its exit status where the job can see it.
gym_step_run() {
    local child rc marker
    "$@" &
    child=$!
    trap 'kill -TERM "$child" 2>/dev/null' TERM INT
    wait "$child"
    rc=$?
    # A trapped signal interrupts wait: wait again for the real exit status.
    while kill -0 "$child" 2>/dev/null; do
        wait "$child"
        rc=$?
    done
    marker="$(gym_state_dir)/exit/$GYM_STEP_NAME@$(gym_this_node)"
    # Its reason first: the job reads the marker as soon as it appears.
    if [ "$rc" -ne 0 ] && [ -n "${GYM_STEP_PORT:-}" ] && ! gym_own_processes_left; then
        gym_port_free "$GYM_STEP_PORT" "when $GYM_STEP_NAME went to bind it"
    fi
    printf '%s\n' "$rc" >"$marker"
    gym_log "step $GYM_STEP_NAME: $1 exited with status $rc"
    return "$rc"
}

# How many nodes of the Ray cluster at address $1 are alive: the "Active:" part of `ray status`,
# which every Ray install answers (`ray list nodes` needs the dashboard, which the minimal Ray of a
# vLLM image lacks). Each line there is "<count> <node type or id>".
gym_ray_alive_nodes() {
    ray status --address "$1" 2>/dev/null |
        awk '/^Active:/ {on = 1; next} /^[A-Z]/ {on = 0} on && $1 ~ /^[0-9]+$/ {n += $1} END {print n + 0}'
}

# Refuse to start a server whose PORT already answers on this node: it would fail to bind, or
# worse, the job would talk to whoever holds the port. Says why where the job reads it. The port
# is remembered: a server that dies as another takes the port (both started at once) is named too.
gym_port_free() {
    local port=$1 when=${2:-before $GYM_STEP_NAME started} why tries=$((${GYM_PORT_WAIT_SECONDS:-0} * 2))
    while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        # A restart lane's next turn: the turn before's servers may still be letting go of it.
        [ "$tries" -le 0 ] || { tries=$((tries - 1)); sleep 0.5; continue; }
        why="port $port on node $(gym_this_node) was already in use $when: another run on this node?"
        gym_log "ERROR: $why"
        printf '%s\n' "$why" >"$(gym_state_dir)/why/$GYM_STEP_NAME@$(gym_this_node)"
        return 1
    done
    GYM_STEP_PORT=$port
    return 0
}

# Whether processes this step started outlive its program (in its process group, not this
# shell's own helpers): then whoever answers on its port may be its own leftover, not another run.
gym_own_processes_left() {
    local table
    table=$(mktemp) || return 0
    ps -e -o pid=,ppid=,pgid= >"$table" 2>/dev/null
    local pid ppid group pgid='' left=1
    while read -r pid ppid group; do [ "$pid" != "$$" ] || pgid=$group; done <"$table"
    while read -r pid ppid group; do
        [ "$group" = "$pgid" ] && [ "$pid" != "$$" ] && [ "$ppid" != "$$" ] && left=0
    done <"$table"
    rm -f "$table"
    return "$left"
}

gym_mark_ready() {
    : >"$(gym_state_dir)/ready/$GYM_STEP_NAME@$(gym_this_node)"
}

# --- in the job script ------------------------------------------------------------------------

# Print why a service is dead and return 1, or return 0 while all its steps live.
gym_check_alive() {
    local service=$1 step marker pid rc node log why
    for step in ${GYM_SERVICE_STEPS[$service]}; do
        for marker in "$(gym_state_dir)/exit/$step@"*; do
            [ -e "$marker" ] || continue
            rc=$(cat "$marker")
            node=${marker##*@}
            why="$(gym_state_dir)/why/${marker##*/}"
            if [ -s "$why" ]; then
                gym_report_death "$service" "$step" "$node" "$(head -c 300 "$why" | tr -cd '[:print:]')"
            else
                gym_report_death "$service" "$step" "$node" "exit status $rc"
            fi
            return 1
        done
        pid=${GYM_STEP_PID[$step]}
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null
            rc=$?
            # The launcher ended: a node failed or the step never started.
            gym_report_death "$service" "$step" "" "launcher exit status $rc"
            return 1
        fi
    done
    return 0
}

gym_report_death() {
    local service=$1 step=$2 node=$3 how=$4 log
    gym_log "ERROR: service $service died${node:+ on node $node} ($how)"
    for log in "logs/$step-$GYM_JOB_ID"*.log; do
        [ -e "$log" ] || continue
        case "$log" in
            *"-$node.log" | "logs/$step-$GYM_JOB_ID.log") ;;
            *) [ -n "$node" ] && continue ;;
        esac
        gym_log "last lines of $log:"
        tail -n 20 "$log" | sed 's/^/    /'
    done
    gym_phase failed "service $service died${node:+ on node $node} ($how)"
}

# Poll a service until it answers, it dies, or its time is up. The first probe is immediate and
# the interval grows from 0.1 s to 1 s, so a fast service is seen fast and a slow one costs little.
# With IDENTITY (a vLLM server's run-unique alias), an answer counts only from a server that lists
# it at /v1/models: whoever else holds the port fails the step at once, named.
gym_wait_http() {
    local service=$1 url=$2 timeout=$3 identity=${4:-} start delay=100 elapsed unproven=""
    start=$(gym_now_ms)
    gym_phase starting "waiting for $service"
    gym_log "waiting for $service at $url (up to ${timeout}s)"
    while :; do
        if curl -sf --max-time 5 -o /dev/null "$url"; then
            # An answer while our own process is gone comes from someone else on that port.
            gym_check_alive "$service" || return 1
            unproven=""
            if [ -n "$identity" ]; then
                gym_check_identity "$service" "$url" "$identity"
                case $? in
                    0) ;;
                    1) return 1 ;;
                    *) unproven=1 ;; # no model list yet (a slow answer): ask again
                esac
            fi
            if [ -z "$unproven" ]; then
                elapsed=$(($(gym_now_ms) - start))
                elapsed=$((elapsed / 1000)).$((elapsed % 1000 / 100))
                gym_log "$service is healthy after ${elapsed}s"
                gym_event "healthy $service"
                # A server proven ours (its alias) is a vLLM server: record which vLLM it is.
                [ -z "$identity" ] || gym_provenance "vllm_version.$service" "$(gym_vllm_version "$url")"
                return 0
            fi
        fi
        gym_check_alive "$service" || return 1
        if [ "$(($(gym_now_ms) - start))" -ge "$((timeout * 1000))" ]; then
            if [ -n "$unproven" ]; then
                gym_log "ERROR: service $service answers $url but lists no models at /v1/models within ${timeout}s"
                gym_phase failed "service $service answers its health check but lists no models at /v1/models within ${timeout}s"
                return 1
            fi
            gym_log "ERROR: service $service not healthy within ${timeout}s ($url)"
            gym_phase failed "service $service not healthy within ${timeout}s"
            return 1
        fi
        gym_sleep_ms "$delay"
        delay=$((delay * 2 > 1000 ? 1000 : delay * 2))
    done
}

# What this job really ran, as this node sees it: KEY=VALUE appended to the benchmark's provenance
# file (gym eval info and results show it), the value's first line, printable, cut short. Never
# fails the job: an unknown version is a missing line.
gym_provenance() {
    local key=$1 value=$2 file="$GYM_JOB_DIR/.gym/provenance"
    value=$(printf '%s' "$value" | head -n 1 | tr -cd '[:print:]' | cut -c 1-200)
    [ -n "$value" ] || return 0
    mkdir -p "${file%/*}" && printf '%s=%s\n' "$key" "$value" >>"$file"
    return 0
}

# The version a vLLM server at URL (its health URL) says it is (GET /version), or nothing.
gym_vllm_version() {
    local url=$1 base
    base=${url#*://}
    base=${url%%://*}://${base%%/*}
    curl -sf --max-time 5 "$base/version" 2>/dev/null | head -c 4096 | grep -o '"version": *"[^"]*"' | head -n 1 | sed 's/^"version": *"//; s/"$//'
}

# Whether the server answering at URL (its health URL) is this job's: 0 when it lists IDENTITY
# among its models; 1 when it lists others (recorded, bounded and printable); 2 when no model
# list could be read (yet): only a list without us proves someone else.
gym_check_identity() {
    local service=$1 url=$2 identity=$3 base models served
    base=${url#*://}
    base=${url%%://*}://${base%%/*}
    models=$(curl -sf --max-time 5 "$base/v1/models" 2>/dev/null | head -c 65536)
    # A here-string, not a pipe: grep -q stops reading at its match, and pipefail would count the
    # writer's SIGPIPE as a failure.
    if grep -qF -- "\"$identity\"" <<<"$models"; then
        return 0
    fi
    grep -q '"data"' <<<"$models" || return 2
    served=$(grep -o '"id": *"[^"]*"' <<<"$models" | head -n 3 | sed 's/^"id": *//' | tr '\n' ' ' | tr -cd '[:print:]' | cut -c 1-200)
    gym_log "ERROR: ${base#*://} is answered by another server (serving ${served:-no model}), not service $service of this job: another run on this node?"
    gym_phase failed "service $service: ${base#*://} is answered by another server (serving ${served:-no model}): another run on this node?"
    return 1
}

# Like gym_wait_http, for steps that say they are ready with a marker file (Ray heads).
gym_wait_marker() {
    local service=$1 step=$2 timeout=$3 start delay=100
    start=$(gym_now_ms)
    gym_phase starting "waiting for $service"
    gym_log "waiting for $service to report ready (up to ${timeout}s)"
    while :; do
        if compgen -G "$(gym_state_dir)/ready/$step@*" >/dev/null; then
            gym_log "$service is ready"
            gym_event "healthy $service"
            return 0
        fi
        gym_check_alive "$service" || return 1
        if [ "$(($(gym_now_ms) - start))" -ge "$((timeout * 1000))" ]; then
            gym_log "ERROR: service $service not ready within ${timeout}s"
            gym_phase failed "service $service not ready within ${timeout}s"
            return 1
        fi
        gym_sleep_ms "$delay"
        delay=$((delay * 2 > 1000 ? 1000 : delay * 2))
    done
}

# Ask the collector to stop and give it time to flush (it is not killed before it writes).
gym_stop_collector() {
    local pid=${GYM_STEP_PID[otel_collector]:-} i
    [ -n "$pid" ] || return 0
    : >"$(gym_state_dir)/stop-collector"
    for ((i = 0; i < 60; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    wait "$pid" 2>/dev/null
    unset 'GYM_STEP_PID[otel_collector]'
    gym_event "collector-stopped"
}

# Stop the named steps, or every step still running (their process groups in a local run), and
# wait for them: a server still holding its port after its job has ended would be found there by
# the next job (or by a warm lane's server started again on it).
gym_stop_steps() {
    local step pid child groups=() others=() i steps=("$@")
    [ $# -gt 0 ] || steps=("${!GYM_STEP_PID[@]}")
    for step in "${steps[@]}"; do
        pid=${GYM_STEP_PID[$step]:-}
        [ -n "$pid" ] || continue
        # A step started from a function runs one level down, in a process group of its own.
        for child in $(pgrep -P "$pid" 2>/dev/null) "$pid"; do
            if kill -TERM -- "-$child" 2>/dev/null; then
                groups+=("$child")
            elif kill -TERM "$child" 2>/dev/null; then
                # An srun: it ends once the step's processes on their nodes have.
                others+=("$child")
            fi
        done
    done
    for ((i = 0; i < 150; i++)); do
        gym_any_alive "${groups[@]+"${groups[@]}"}" || gym_any_running "${others[@]+"${others[@]}"}" || return 0
        sleep 0.1
    done
    for pid in "${groups[@]+"${groups[@]}"}"; do
        kill -KILL -- "-$pid" 2>/dev/null
    done
    return 0
}

# Whether any of the given processes still runs.
gym_any_running() {
    local pid
    for pid in "$@"; do
        kill -0 "$pid" 2>/dev/null && return 0
    done
    return 1
}

# Whether any of the given process groups still has a process.
gym_any_alive() {
    local group
    for group in "$@"; do
        kill -0 -- "-$group" 2>/dev/null && return 0
    done
    return 1
}
