set -u
umask 022
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

gym_missing_inputs() {
    local expected="$1/artifacts/rollouts_materialized_inputs.jsonl" written="$1/artifacts/rollouts.jsonl" rc
    [ -f "$expected" ] || return 1
    [ -f "$written" ] || written=/dev/null
    gym_row_awk
    # shellcheck disable=SC2016  # the program is awk's: its $ are not the shell's
    GYM_MISSING_OUT=$2 LC_ALL=C "$gym_awk" -v max=67108864 -v window=4096 '
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
        function choose(  i) {
            chosen = 1; printf "" > out
            for (i = 1; i <= n; i++) if (!(order[i] in got)) { k++; pick[first[order[i]]] = order[i] }
        }
        BEGIN { out = ENVIRON["GYM_MISSING_OUT"] }
        FILENAME == ARGV[1] {
            if (blank($0)) next
            p = pair($0); if (p == "") { untrusted = 1; exit }
            if (!(p in first)) { first[p] = FNR; order[++n] = p }
            next
        }
        FILENAME == ARGV[2] { p = pair($0); if (p != "") got[p] = 1; next }
        !chosen { choose() }
        FNR in pick { if (pair($0) != pick[FNR]) { changed = 1; exit }; print > out; printed++ }
        END {
            if (untrusted) exit 1
            if (!chosen) choose()
            if (changed || printed != k) exit 2
            printf "%d\n", k
        }' <(LC_ALL=C cut -b "1-67108865" "$expected") <(LC_ALL=C cut -b "1-67108865" "$written") \
        <(LC_ALL=C cut -b "1-67108865" "$expected") && return 0
    rc=$?
    [ "$rc" = 1 ] || rm -f -- "$2"
    return 1
}

printf '%s\n' __GYM_RUN:gym-job-20260101T000000Z-000000
(
    export GYM_GOLDEN_SECRET=golden-secret-value
    # a: attempt 2, generate-missing after job 4000
    gym_d=/lustre/runs/gym-job-20260101T000000Z-000000/a
    gym_a="$gym_d/.gym/attempts/2"
    gym_ok=1
    # Planned from a probe a moment ago: a resubmit that has queued it since makes this one stale.
    gym_made=$(grep -c "^resubmit"$'\t' "$gym_d/.gym/chain" 2>/dev/null) || gym_made=${gym_made:-0}
    if [ "$gym_made" -ne 0 ]; then
        printf '%s:1:%s\n' __GYM_JOB:a "it was resubmitted meanwhile (attempt $((gym_made + 1)) is queued); see gym eval status"
        gym_ok=0
    elif ! mkdir -p "$gym_a/earlier"; then
        printf '%s:1:%s\n' __GYM_JOB:a "cannot write $gym_a"
        gym_ok=0
    fi
    if [ "$gym_ok" -eq 1 ]; then
        for gym_kept in artifacts .gym/exports .gym/cancelled; do
            if [ -e "$gym_d/$gym_kept" ] && ! cp -a "$gym_d/$gym_kept" "$gym_a/earlier/"; then
                printf '%s:1:%s\n' __GYM_JOB:a "could not keep $gym_kept aside in $gym_a; nothing queued"
                gym_ok=0
                break
            fi
        done
    fi
    if [ "$gym_ok" -eq 1 ]; then
        gym_n=$(gym_missing_inputs "$gym_d" "$gym_a/inputs.jsonl") || gym_n=''
        printf '%s:%s\n' __GYM_INPUTS:a "$gym_n"
        if [ -z "$gym_n" ] || [ "$gym_n" = 0 ]; then
            printf '%s:1:%s\n' __GYM_JOB:a "no missing rows could be listed from its materialized inputs; nothing queued"
            gym_ok=0
        fi
    fi
    if [ "$gym_ok" -eq 1 ]; then
        gym_err=$(mktemp); gym_so=$(sbatch --parsable --hold /lustre/runs/gym-job-20260101T000000Z-000000/a/job.sh 2>"$gym_err"); gym_rc=$?
        gym_out="$gym_so $(cat "$gym_err")"; rm -f "$gym_err"
        # The id is the last line (site plugins may say more before it), without ";cluster"; digits only.
        gym_id=''; while IFS= read -r gym_line; do [ -z "${gym_line// /}" ] || gym_id=${gym_line%%;*}; done <<<"$gym_so"
        case $gym_id in '' | *[!0-9]*) gym_id='' ;; esac
        [ "$gym_rc" -eq 0 ] || gym_id=''
        if [ -z "$gym_id" ]; then
            printf '%s:%s:%s\n' __GYM_JOB:a "$gym_rc" "$(printf '%s' "$gym_out" | tr '\n' ' ')"
        else
            # Held: nothing of it runs until it is recorded. The earlier attempt's cancel was not
            # this one's (kept aside above); every job of it from now on keeps what is on disk.
            gym_rows=$( (cat "$gym_d/artifacts/rollouts.jsonl" 2>/dev/null || true) | wc -l)
            if rm -f "$gym_d/.gym/cancelled" && : >"$gym_d/.gym/continue" &&
                printf 'resubmit\t%s\t%s\t%s\t%s\t%s\n' "$gym_id" 4000 2 generate-missing "$gym_rows" >>"$gym_d/.gym/chain"; then
                scontrol release "$gym_id" >/dev/null 2>&1 || printf '%s\n' __GYM_NOT_RELEASED:a
                printf '%s:0:%s\n' __GYM_JOB:a "$gym_id"
            else
                scancel "$gym_id" >/dev/null 2>&1
                printf '%s:1:%s\n' __GYM_JOB:a "could not record job $gym_id in $gym_d/.gym/chain; it was cancelled unrun"
            fi
        fi
    fi
    # b: attempt 2, requeue after job 4000
    gym_d=/lustre/runs/gym-job-20260101T000000Z-000000/b
    gym_a="$gym_d/.gym/attempts/2"
    gym_ok=1
    # Planned from a probe a moment ago: a resubmit that has queued it since makes this one stale.
    gym_made=$(grep -c "^resubmit"$'\t' "$gym_d/.gym/chain" 2>/dev/null) || gym_made=${gym_made:-0}
    if [ "$gym_made" -ne 0 ]; then
        printf '%s:1:%s\n' __GYM_JOB:b "it was resubmitted meanwhile (attempt $((gym_made + 1)) is queued); see gym eval status"
        gym_ok=0
    elif ! mkdir -p "$gym_a/earlier"; then
        printf '%s:1:%s\n' __GYM_JOB:b "cannot write $gym_a"
        gym_ok=0
    fi
    if [ "$gym_ok" -eq 1 ]; then
        for gym_kept in artifacts .gym/exports .gym/cancelled; do
            if [ -e "$gym_d/$gym_kept" ] && ! cp -a "$gym_d/$gym_kept" "$gym_a/earlier/"; then
                printf '%s:1:%s\n' __GYM_JOB:b "could not keep $gym_kept aside in $gym_a; nothing queued"
                gym_ok=0
                break
            fi
        done
    fi
    if [ "$gym_ok" -eq 1 ]; then
        gym_err=$(mktemp); gym_so=$(sbatch --parsable --hold /lustre/runs/gym-job-20260101T000000Z-000000/b/job.sh 2>"$gym_err"); gym_rc=$?
        gym_out="$gym_so $(cat "$gym_err")"; rm -f "$gym_err"
        # The id is the last line (site plugins may say more before it), without ";cluster"; digits only.
        gym_id=''; while IFS= read -r gym_line; do [ -z "${gym_line// /}" ] || gym_id=${gym_line%%;*}; done <<<"$gym_so"
        case $gym_id in '' | *[!0-9]*) gym_id='' ;; esac
        [ "$gym_rc" -eq 0 ] || gym_id=''
        if [ -z "$gym_id" ]; then
            printf '%s:%s:%s\n' __GYM_JOB:b "$gym_rc" "$(printf '%s' "$gym_out" | tr '\n' ' ')"
        else
            # Held: nothing of it runs until it is recorded. The earlier attempt's cancel was not
            # this one's (kept aside above); every job of it from now on keeps what is on disk.
            gym_rows=$( (cat "$gym_d/artifacts/rollouts.jsonl" 2>/dev/null || true) | wc -l)
            if rm -f "$gym_d/.gym/cancelled" && : >"$gym_d/.gym/continue" &&
                printf 'resubmit\t%s\t%s\t%s\t%s\t%s\n' "$gym_id" 4000 2 requeue "$gym_rows" >>"$gym_d/.gym/chain"; then
                scontrol release "$gym_id" >/dev/null 2>&1 || printf '%s\n' __GYM_NOT_RELEASED:b
                printf '%s:0:%s\n' __GYM_JOB:b "$gym_id"
            else
                scancel "$gym_id" >/dev/null 2>&1
                printf '%s:1:%s\n' __GYM_JOB:b "could not record job $gym_id in $gym_d/.gym/chain; it was cancelled unrun"
            fi
        fi
    fi
)
true
