# What Slurm says of job $1, into gym_answer: scontrol's line, then sacct's State|ExitCode where there is accounting
# (it remembers what scontrol forgot, MinJobAge). A heterogeneous job prints a line per component:
# the first (offset 0) is the job's. After gym_describe_snapshot (describe_snapshot), both come
# from its two calls for the jobs it was taken for; any other job is asked on its own. When neither
# answers and slurmctld is down, the line is ? and why: a job Slurm could not
# be asked about is not a job it forgot.
have_sacct=0; command -v sacct >/dev/null 2>&1 && have_sacct=1
gym_describe_job() {
    local sc='' sa=''
    case ",${gym_snapshot_ids:-}," in
        *",$1,"*)
            # In the snapshot: what it holds of the job is all Slurm knows; absent from it, the
            # job was forgotten (MinJobAge).
            sc=${gym_sc_of[$1]-}
            # -D lists every run of a requeued job, oldest first: the last is its state now. (When
            # sacct could not answer for them all, it cannot for one either.)
            if [ -z "$sc" ] && [ "$gym_sa_ok" = 1 ]; then
                sa=${gym_sa_of[$1]-}
            fi
            ;;
        *)
            sc=$(scontrol show job -o "$1" 2>/dev/null) || sc=''
            sc=${sc%%$'\n'*}
            [ -n "$sc" ] || [ "$have_sacct" != 1 ] || sa=$(sacct -X -n -P -j "$1" -o State,ExitCode 2>/dev/null | head -1)
            ;;
    esac
    if [ -z "$sc$sa" ]; then
        # Asked once per probe: a controller that is down answers nothing for every job.
        [ -n "${gym_ctld_said+set}" ] || gym_ctld_said=$(scontrol ping 2>/dev/null) || gym_ctld_said="? ${gym_ctld_said%%$'\n'*}"
        [ "${gym_ctld_said:0:1}" != "?" ] || sc='?'" ${gym_ctld_said#? }"
    fi
    printf -v gym_answer '%s\x1f%s' "$sc" "$sa"
}
# JobID|ElapsedRaw|AllocTRES of every run of the comma-separated jobs $1 (a heterogeneous job's
# components as <id>+<offset>), each line $2 and its fields, \x1f before each: from the
# snapshot when it holds them all (no process started), else one sacct.
gym_accounting_records() {
    local id missing=0 row ids=''
    local -A said=()
    # Benchmarks that share a job each name it: its runs are told once.
    for id in ${1//,/ }; do
        [ -n "${said[$id]+set}" ] && continue
        said[$id]=1
        ids+=",$id"
    done
    ids=${ids#,}
    if [ -n "${gym_snapshot_ids:-}" ]; then
        # sacct could not answer for them all a moment ago: it cannot for these either.
        [ "$gym_sa_ok" = 1 ] || return 0
        for id in ${ids//,/ }; do
            # Ids read back from chain files: a word that is not Slurm's is not in the snapshot.
            if [[ ! $id =~ ^[0-9]+(_[0-9]+)?$ ]]; then missing=1; else case ",$gym_snapshot_ids," in *",$id,"*) ;; *) missing=1 ;; esac; fi
        done
        if [ "$missing" = 0 ]; then
            for id in ${ids//,/ }; do
                while IFS= read -r row; do
                    [ -n "$row" ] && printf '%s\x1f%s\n' "$2" "${row//|/$'\x1f'}"
                done <<<"${gym_runs_of[$id]-}"
            done
            return
        fi
    fi
    [ -n "$ids" ] || return 0
    while IFS= read -r row; do
        printf '%s\x1f%s\n' "$2" "${row//|/$'\x1f'}"
    done < <(sacct -X -D -n -P -j "$ids" -o JobID,ElapsedRaw,AllocTRES 2>/dev/null)
}

# Bash builtins wherever they do: a sweep's probe reads hundreds of jobs, and a process per file
# read cost more than all the rest. gym_slurp VAR FILE [MAX]: the file's text (at most MAX
# characters), nothing when it is missing. (bash variables hold no NUL byte: one is dropped).
gym_slurp() { IFS= read -r -N "${3:-1048576}" "$1" 2>/dev/null <"$2" || true; }
# gym_chain_of FIRST CHAIN_TEXT: the job ids the chain names (started or queued), FIRST first,
# each once, in gym_chain_ids; gym_chain_joined VAR puts them in VAR as a comma list.
gym_chain_of() {
    local line kind id rest
    local -A seen=()
    gym_chain_ids=()
    [ -n "$1" ] && { seen[$1]=1; gym_chain_ids+=("$1"); }
    # Split at each tab, as the chain's reader does (read would merge empty fields).
    while IFS= read -r line; do
        case $line in *$'\t'*) ;; *) continue ;; esac
        kind=${line%%$'\t'*}
        rest=${line#*$'\t'}
        id=${rest%%$'\t'*}
        case $kind in
            fed | start | successor | resubmit)
                [ -n "$id" ] && [ -z "${seen[$id]+set}" ] && { seen[$id]=1; gym_chain_ids+=("$id"); } ;;
        esac
    done <<<"$2"
}
gym_chain_joined() { local IFS=,; printf -v "$1" '%s' "${gym_chain_ids[*]-}"; }
# The last job-end event's value in an events file: read in bash when it is small (as it is),
# else its last job-end line found by grep.
gym_job_end_of() {
    local text t kind value rest
    gym_end=''
    [ -f "$1" ] || return 0
    text=''; gym_slurp text "$1" 65536
    if [ "${#text}" -ge 65536 ]; then
        read -r t kind value rest < <(grep -E '^[^ ]+ job-end( |$)' "$1" 2>/dev/null | tail -n 1)
        gym_end=${value-}
        return 0
    fi
    while read -r t kind value rest; do
        [ "$kind" = job-end ] && gym_end=$value
    done <<<"$text"
}
gym_probe() {
    local b=$1 d=$2 first=$3 check=$4 out ch chain again id st cs answer n latest line every cancelled
    local -a recent
    gym_slurp chain "$d/.gym/chain"
    for _ in 1 2 3; do
        gym_chain_of "$first" "$chain"
        out=""
        latest=""
        # The last four jobs of the chain: those status speaks of.
        recent=(${gym_chain_ids[@]+"${gym_chain_ids[@]:$((${#gym_chain_ids[@]} > 4 ? ${#gym_chain_ids[@]} - 4 : 0))}"})
        for id in ${recent[@]+"${recent[@]}"}; do
            st=''; gym_slurp st "$d/.gym/$id/state" 65536
            st=${st//$'\n'/$'\t'}
            # The newest job that wrote a state (a resume job Slurm dropped unrun never does).
            [ -n "$st" ] && latest=$st
            gym_job_end_of "$d/.gym/$id/events"
            [ -n "$gym_end" ] && st="$st"$'\t'"job_end=$gym_end"
            # Why it failed, as it recorded (one word; bounded: the file is the job's, untrusted).
            cs=''; gym_slurp cs "$d/.gym/$id/cause" 64
            cs=${cs//[$'\t\r\n']/}
            [ -n "$cs" ] && st="$st"$'\t'"cause=$cs"
            { [ -e "$d/.gym/$id/cancelled" ] || [ -e "$d/.gym/cancelled" ]; } && st="$st"$'\t'cancelled_by_user=1
            gym_describe_job "$id"
            answer=$gym_answer
            printf -v line '__GYM_PROBE:J\x1f%s\x1f%s\x1f%s\x1f%s' "$b" "$id" "$st" "$answer"
            out+=$line$'\n'
        done
        # Read again after the scheduler was asked: unchanged, the answers explain the chain.
        again=''; gym_slurp again "$d/.gym/chain"
        [ "$again" = "$chain" ] && break
        chain=$again
    done
    ch=''; [ -n "$chain" ] && ch=$(printf '%s' "$chain" | base64 -w0)
    n=0; [ -f "$d/artifacts/rollouts.jsonl" ] && n=$(wc -l <"$d/artifacts/rollouts.jsonl")
    printf '%s' "$out"
    cancelled=0; [ -e "$d/.gym/cancelled" ] && cancelled=1
    printf '__GYM_PROBE:B\x1f%s\x1f%s\x1f%s\x1f%s\n' "$b" "$n" "$ch" "$cancelled"
    gym_exports "$b" "$d"
    gym_usage "$b" "$d"
    gym_chain_joined every
    gym_all_ids+=",$every"
    # The samples are counted once the latest job has ended: its files are final then.
    if [ "$check" = 1 ]; then
        case $latest in phase=succeeded*|phase=failed*|phase=cancelled*) gym_check_samples "$b" "$d" ;; esac
    fi
}
# The export receipts of benchmark $1 in directory $2.
gym_exports() {
    local f
    for f in "$2/.gym/exports/"*.json; do
        [ -f "$f" ] && printf '__GYM_PROBE:X\x1f%s\x1f%s\x1f%s\n' "$1" "$(basename "$f" .json)" "$(base64 -w0 "$f")"
    done
    return 0
}
# A sharded benchmark's own directory (its shards are probed as jobs): whether its shards were
# merged and the rollouts merged, its exports, and the merged samples once they were.
gym_probe_merged() {
    local b=$1 d=$2 check=$3 n=-1
    if [ -e "$d/.gym/shards/merged" ]; then
        n=0; [ -f "$d/artifacts/rollouts.jsonl" ] && n=$(wc -l <"$d/artifacts/rollouts.jsonl")
    fi
    printf '__GYM_PROBE:G\x1f%s\x1f%s\n' "$b" "$n"
    gym_exports "$b" "$d"
    [ "$check" = 1 ] && [ "$n" -ge 0 ] && gym_check_samples "$b" "$d"
    return 0
}
# Per run of a job (a state directory): its job-start, its job-end and its last event; and the
# times its state, heartbeat and log files were last written (its last signs of life).
gym_usage() {
    local b=$1 d=$2 files t p name dir
    files=("$d"/.gym/*/events)
    [ -e "${files[0]}" ] || return 0
    awk -v m='__GYM_PROBE:' -v b="$b" '
        function out(  n, parts) { n = split(f, parts, "/"); printf "%sE\037%s\037%s\037%s\037%s\037%s\n", m, b, parts[n - 1], s, e, l }
        FNR == 1 { if (f != "") out(); f = FILENAME; s = ""; e = ""; l = "" }
        $2 == "job-start" && s == "" { s = $1 }
        $2 == "job-end" { e = $1 }
        { l = $1 }
        END { if (f != "") out() }' "${files[@]}"
    while read -r t p; do
        name=${p##*/}; dir=${p%/*}; dir=${dir##*/}
        printf '%sM\x1f%s\x1f%s\x1f%s\x1f%s\n' '__GYM_PROBE:' "$b" "$dir" "$name" "$t"
    done < <(stat -c '%Y %n' "$d"/.gym/*/state "$d"/.gym/*/heartbeat "$d"/slurm-*.out 2>/dev/null)
}


# The awk that reads rows: gawk where the host has it. mawk (Debian's and Ubuntu's awk) reads a
# line in time quadratic in its length: 5 s for a 32 MB row, 20 s for one at max_row.
gym_row_awk() {
    gym_awk="awk"
    if command -v gawk >/dev/null 2>&1; then gym_awk=gawk; fi
}
gym_check_samples() {
    local b=$1 expected="$2/artifacts/rollouts_materialized_inputs.jsonl" written="$2/artifacts/rollouts.jsonl"
    [ -f "$expected" ] || return 0
    [ -f "$written" ] || written=/dev/null
    gym_row_awk
    # shellcheck disable=SC2016  # the program is awk's: its $ are not the shell's
    LC_ALL=C "$gym_awk" -v m='__GYM_PROBE:' -v b="$b" -v named=5 -v max=67108864 -v window=4096 '
        function near_ends(line,  n) {
            n = length(line)
            return n <= 2 * window ? line : substr(line, 1, window) "\n" substr(line, n - window + 1)
        }
        function index_of(w, key,  v) {
            if (!match(w, "\"" key "\"[ \t\r]*:[ \t\r]*-?[0-9]+[ \t\r]*[,}]")) return ""
            v = substr(w, RSTART, RLENGTH); sub(/^.*:[ \t\r]*/, "", v); sub(/[ \t\r]*[,}]$/, "", v)
            return v == "-0" ? "0" : v
        }
        function pair(line,  w, t, r) {
            if (length(line) > max) return ""
            w = near_ends(line)
            if (w !~ /^[ \t\r]*[{]/ || w !~ /[}][ \t\r]*$/) return ""
            t = index_of(w, "_ng_task_index"); r = index_of(w, "_ng_rollout_index")
            return t == "" || r == "" ? "" : t ":" r
        }
        function blank(line) { return length(line) <= max && line ~ /^[ \t\r]*$/ }
        FILENAME == ARGV[1] {
            if (blank($0)) next
            p = pair($0); if (p == "") untrusted = 1; else if (!(p in want)) { want[p] = 1; order[++n] = p }
            next
        }
        blank($0) { next }
        { p = pair($0); if (p == "") { bad++; next }; if (p in got) { dup++; next }; got[p] = 1; if (p in want) done++; else extra++ }
        END {
            if (untrusted) exit
            for (i = 1; i <= n; i++) if (!(order[i] in got)) { k++; if (k <= named) shown = shown (shown == "" ? "" : " ") order[i] }
            printf "%sC\037%s\037%d\037%d\037%d\037%d\037%d\037%s\037%d\n", m, b, n, done + extra, dup, extra, k, shown, bad
        }' <(LC_ALL=C cut -b "1-67108865" "$expected") <(LC_ALL=C cut -b "1-67108865" "$written")
}

# The host's Python (backends/slurm_host.py) reads scontrol's answer: without python3, no snapshot.
gym_slurm_host='<shipping.inline(Program.SCHEDULER_HOST)>'
gym_describe_snapshot() {
    local all line id base state code elapsed tres
    have_sacct=0; command -v sacct >/dev/null 2>&1 && have_sacct=1
    gym_snapshot_ids=''  # until the snapshot is taken, each job is asked on its own
    gym_sa_ok=0
    # Looked up by id (bash associative arrays): asking each of hundreds of jobs of one big text
    # would read it hundreds of times.
    declare -gA gym_sc_of=() gym_sa_of=() gym_runs_of=()
    command -v python3 >/dev/null 2>&1 || return 0
    # Every job slurmctld holds (hidden partitions too), kept for the wanted ids only.
    # SLURM_BITSTR_LEN=0: a job array's pending tasks in full (scontrol cuts them at 64 characters).
    if ! all=$(SLURM_BITSTR_LEN=0 scontrol -a show job -o 2>/dev/null); then
        # No answer: each job is asked on its own, unless slurmctld is down (for a maintenance):
        # then each is told so (gym_describe_job), with what accounting still says.
        gym_ctld_said=$(scontrol ping 2>/dev/null) && return 0
        gym_ctld_said="? ${gym_ctld_said%%$'\n'*}"
        all=''
    fi
    # First the ids that are Slurm's (read back from chain files), each once, then each wanted
    # job's record: an array's pending tasks are one record, each task known by its ARRAY_TASK id.
    {
        IFS= read -r gym_snapshot_ids
        while IFS=$'\x1f' read -r id line; do
            [ -n "${gym_sc_of[$id]+set}" ] || gym_sc_of[$id]=$line  # a heterogeneous job's first component
        done
    } < <(printf '%s\n' "$all" | python3 -E -s -c "$gym_slurm_host" snapshot "$1" 2>/dev/null)
    if [ "$have_sacct" = 1 ] && [ -n "$gym_snapshot_ids" ]; then
        # When sacct cannot answer, a forgotten job is asked on its own, as without a snapshot.
        all=$(sacct -X -D -n -P -j "$gym_snapshot_ids" -o JobID,State,ExitCode,ElapsedRaw,AllocTRES 2>/dev/null) &&
            gym_sa_ok=1
        while IFS='|' read -r id state code elapsed tres; do
            [ -n "$id" ] || continue
            # Every run of a job (and of each component: <id>+<offset>), for its GPU-hours; its
            # state is its last run's (component 0's for a heterogeneous job).
            base=${id%%+*}
            gym_runs_of[$base]+="$id|$elapsed|$tres"$'\n'
            case $id in "$base" | "$base+0") gym_sa_of[$base]="$state|$code" ;; esac
        done <<<"$all"
    fi
}
gym_snapshot_of=''
gym_chain_text=''; gym_ids_text=''; gym_slurp gym_chain_text /lustre/runs/gym-job-20260101T000000Z-000000/a/.gym/chain; gym_chain_of 4000 "$gym_chain_text"; gym_chain_joined gym_ids_text; gym_snapshot_of+=",$gym_ids_text"
gym_chain_text=''; gym_ids_text=''; gym_slurp gym_chain_text /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/chain; gym_chain_of 4000 "$gym_chain_text"; gym_chain_joined gym_ids_text; gym_snapshot_of+=",$gym_ids_text"
gym_describe_snapshot "${gym_snapshot_of#,}"
printf '%s\n' __GYM_PROBE_RUN:0
(
gym_all_ids=''
printf '%sT\x1f%(%s)T\n' __GYM_PROBE: -1
gym_probe a /lustre/runs/gym-job-20260101T000000Z-000000/a 4000 1
gym_probe b /lustre/runs/gym-job-20260101T000000Z-000000/b 4000 1
[ -d /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment ] && gym_usage '' /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment
gym_all_ids=${gym_all_ids#,}
if [ "$have_sacct" = 1 ] && [ -n "$gym_all_ids" ]; then
  gym_accounting_records "$gym_all_ids" __GYM_PROBE:A
fi
) </dev/null
