gym_describe_snapshot() {
    local all
    have_sacct=0; command -v sacct >/dev/null 2>&1 && have_sacct=1
    # Job ids read back from chain files: Slurm's (digits) only, or one bad id fails the one sacct.
    gym_snapshot_ids=$(printf '%s\n' "${1//,/$'\n'}" | grep -E '^[0-9]+$' | paste -sd, -)
    # Every job slurmctld holds (hidden partitions too), kept for the wanted ids only.
    if ! all=$(scontrol -a show job -o 2>/dev/null); then
        gym_snapshot_ids=''  # slurmctld did not answer: each job is asked on its own
        return 0
    fi
    gym_sc_snapshot=$(printf '%s\n' "$all" | awk -v ids=",$gym_snapshot_ids," '/^JobId=/ && index(ids, "," substr($1, 7) ",")')
    gym_sa_snapshot='' gym_sa_ok=0
    if [ "$have_sacct" = 1 ] && [ -n "$gym_snapshot_ids" ]; then
        # When sacct cannot answer, a forgotten job is asked on its own, as without a snapshot.
        gym_sa_snapshot=$(sacct -X -D -n -P -j "$gym_snapshot_ids" -o JobID,State,ExitCode,ElapsedRaw,AllocTRES 2>/dev/null) &&
            gym_sa_ok=1
    fi
}
gym_snapshot_of=''
gym_snapshot_of+=",$({ echo 4000; awk -F'\t' '$1 == "start" || $1 == "successor" || $1 == "resubmit" {print $2}' /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/chain 2>/dev/null; } | awk '!seen[$0]++' | paste -sd, -)"
gym_describe_snapshot "${gym_snapshot_of#,}"
printf '%s\n' __GYM_PROBE_RUN:0
(
# What Slurm says of job $1: scontrol's line, then sacct's State|ExitCode where there is accounting
# (it remembers what scontrol forgot, MinJobAge). A heterogeneous job prints a line per component:
# the first (offset 0) is the job's. After gym_describe_snapshot (describe_snapshot), both come
# from its two calls for the jobs it was taken for; any other job is asked on its own.
have_sacct=0; command -v sacct >/dev/null 2>&1 && have_sacct=1
gym_describe_job() {
    local sc='' sa=''
    case ",${gym_snapshot_ids:-}," in
        *",$1,"*)
            # In the snapshot: what it holds of the job is all Slurm knows; absent from it, the
            # job was forgotten (MinJobAge).
            sc=$(printf '%s\n' "$gym_sc_snapshot" | awk -v id="JobId=$1" '$1 == id { print; exit }')
            # -D lists every run of a requeued job, oldest first: the last is its state now. (When
            # sacct could not answer for them all, it cannot for one either.)
            if [ -z "$sc" ] && [ "$gym_sa_ok" = 1 ]; then
                sa=$(printf '%s\n' "$gym_sa_snapshot" | awk -F'|' -v id="$1" '$1 == id || $1 == id "+0" { s = $2 "|" $3 } END { if (s != "") print s }')
            fi
            ;;
        *)
            sc=$(scontrol show job -o "$1" 2>/dev/null | head -n 1)
            [ -n "$sc" ] || [ "$have_sacct" != 1 ] || sa=$(sacct -X -n -P -j "$1" -o State,ExitCode 2>/dev/null | head -1)
            ;;
    esac
    printf '%s\x1f%s' "$sc" "$sa"
}
# JobID|ElapsedRaw|AllocTRES of every run of the comma-separated jobs $1 (a heterogeneous job's
# components as <id>+<offset>): from the snapshot when it holds them all, else one sacct.
gym_accounting_rows() {
    local id missing=0
    if [ -n "${gym_snapshot_ids:-}" ]; then
        # sacct could not answer for them all a moment ago: it cannot for these either.
        [ "$gym_sa_ok" = 1 ] || return 0
        for id in ${1//,/ }; do
            case ",$gym_snapshot_ids," in *",$id,"*) ;; *) missing=1 ;; esac
        done
        if [ "$missing" = 0 ]; then
            printf '%s\n' "$gym_sa_snapshot" | awk -F'|' -v ids=",$1," 'NF >= 5 { split($1, p, "+"); if (index(ids, "," p[1] ",")) print $1 "|" $4 "|" $5 }'
            return
        fi
    fi
    sacct -X -D -n -P -j "$1" -o JobID,ElapsedRaw,AllocTRES 2>/dev/null
}
gym_all_ids=''

# A file's text, nothing when it is missing (`cmd <file` would not run cmd at all then).
gym_read() { cat "$1" 2>/dev/null; }
gym_chain_ids() { { echo "$1"; awk -F'\t' '$1 == "start" || $1 == "successor" || $1 == "resubmit" {print $2}'; } | awk '!seen[$0]++' | tail -n 4; }
gym_probe() {
    local b=$1 d=$2 first=$3 check=$4 ids now ch out id st en cs answer n latest
    for _ in 1 2 3; do
        ids=$(gym_read "$d/.gym/chain" | gym_chain_ids "$first")
        out=""
        latest=""
        for id in $ids; do
            st=$(gym_read "$d/.gym/$id/state" | tr '\n' '\t')
            # The newest job that wrote a state (a resume job Slurm dropped unrun never does).
            [ -n "$st" ] && latest=$st
            en=$(awk '$2 == "job-end" { e = $3 } END { printf "%s", e }' "$d/.gym/$id/events" 2>/dev/null)
            [ -n "$en" ] && st="$st"$'\t'"job_end=$en"
            # Why it failed, as it recorded (one word; bounded: the file is the job's, untrusted).
            cs=$(head -c 64 "$d/.gym/$id/cause" 2>/dev/null | tr -d '\t\r\n')
            [ -n "$cs" ] && st="$st"$'\t'"cause=$cs"
            { [ -e "$d/.gym/$id/cancelled" ] || [ -e "$d/.gym/cancelled" ]; } && st="$st"$'\t'cancelled_by_user=1
            answer=$(gym_describe_job "$id")
            out+="$(printf '__GYM_PROBE:J\x1f%s\x1f%s\x1f%s\x1f%s' "$b" "$id" "$st" "$answer")"$'\n'
        done
        ch=$(base64 -w0 "$d/.gym/chain" 2>/dev/null)
        now=$(printf '%s' "$ch" | base64 -d 2>/dev/null | gym_chain_ids "$first")
        [ "$ids" = "$now" ] && break
    done
    n=$(gym_read "$d/artifacts/rollouts.jsonl" | wc -l)
    printf '%s' "$out"
    printf '__GYM_PROBE:B\x1f%s\x1f%s\x1f%s\n' "$b" "$n" "$ch"
    for f in "$d/.gym/exports/"*.json; do
        [ -f "$f" ] && printf '__GYM_PROBE:X\x1f%s\x1f%s\x1f%s\n' "$b" "$(basename "$f" .json)" "$(base64 -w0 "$f")"
    done
    gym_usage "$b" "$d"
    if [ -f "$d/.gym/chain" ]; then
        gym_all_ids+=",$({ echo "$first"; awk -F'\t' '$1 == "start" || $1 == "successor" || $1 == "resubmit" {print $2}' "$d/.gym/chain"; } | awk '!seen[$0]++' | paste -sd, -)"
    else
        gym_all_ids+=",$first"
    fi
    # The samples are counted once the latest job has ended: its files are final then.
    if [ "$check" = 1 ]; then
        case $latest in phase=succeeded*|phase=failed*|phase=cancelled*) gym_check_samples "$b" "$d" ;; esac
    fi
}
# Per run of a job (a state directory): its job-start, its job-end and its last event; and the
# times its state, heartbeat and log files were last written (its last signs of life).
gym_usage() {
    local b=$1 d=$2 files
    files=("$d"/.gym/*/events)
    [ -e "${files[0]}" ] || return 0
    awk -v m='__GYM_PROBE:' -v b="$b" '
        function out(  n, parts) { n = split(f, parts, "/"); printf "%sE\037%s\037%s\037%s\037%s\037%s\n", m, b, parts[n - 1], s, e, l }
        FNR == 1 { if (f != "") out(); f = FILENAME; s = ""; e = ""; l = "" }
        $2 == "job-start" && s == "" { s = $1 }
        $2 == "job-end" { e = $1 }
        { l = $1 }
        END { if (f != "") out() }' "${files[@]}"
    stat -c '%Y %n' "$d"/.gym/*/state "$d"/.gym/*/heartbeat "$d"/slurm-*.out 2>/dev/null |
        awk -v m='__GYM_PROBE:' -v b="$b" '{ p = $0; sub(/^[0-9]+ /, "", p); n = split(p, parts, "/"); printf "%sM\037%s\037%s\037%s\037%s\n", m, b, parts[n - 1], parts[n], $1 }'
}


gym_check_samples() {
    local b=$1 expected="$2/artifacts/rollouts_materialized_inputs.jsonl" written="$2/artifacts/rollouts.jsonl"
    [ -f "$expected" ] || return 0
    [ -f "$written" ] || written=/dev/null
    LC_ALL=C awk -v m='__GYM_PROBE:' -v b="$b" -v named=5 -v max=67108864 -v window=4096 '
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

printf '%sT\x1f%s\n' __GYM_PROBE: "$(date +%s)"
gym_probe b /lustre/runs/gym-job-20260101T000000Z-000000/b 4000 1
[ -d /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment ] && gym_usage '' /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment
gym_all_ids=${gym_all_ids#,}
if [ "$have_sacct" = 1 ] && [ -n "$gym_all_ids" ]; then
  gym_accounting_rows "$gym_all_ids" |
    awk -F'|' -v m=__GYM_PROBE: '{ printf "%sA\037%s\037%s\037%s\n", m, $1, $2, $3 }'
fi
) </dev/null
