gym_cancel_list=$(mktemp) || exit 1
trap 'rm -f "$gym_cancel_list"' EXIT
gym_now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
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
gym_run=0
printf '%s%s\n' __GYM_RUN: "$gym_run"
(
{ [ -d /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym ] || mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym; } && printf '%s\n' "$gym_now" >/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym/cancelled
gym_chain_text=''; gym_slurp gym_chain_text /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/.gym/chain; gym_chain_of '' "$gym_chain_text"
for gym_id in ${gym_chain_ids[@]+"${gym_chain_ids[@]}"}; do
  [[ ! $gym_id =~ ^[0-9]+(_[0-9]+)?$ ]] || printf '%s\t%s\t%s\n' "$gym_run" answer-judge "$gym_id" >>"$gym_cancel_list"
done
[ ! -d /lustre/runs/gym-job-20260101T000000Z-000000/math/.gym/4003 ] || printf '%s\n' "$gym_now" >/lustre/runs/gym-job-20260101T000000Z-000000/math/.gym/4003/cancelled
{ [ -d /lustre/runs/gym-job-20260101T000000Z-000000/math/.gym ] || mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/math/.gym; } && printf '%s\n' "$gym_now" >/lustre/runs/gym-job-20260101T000000Z-000000/math/.gym/cancelled
gym_chain_text=''; gym_slurp gym_chain_text /lustre/runs/gym-job-20260101T000000Z-000000/math/.gym/chain; gym_chain_of 4003 "$gym_chain_text"
for gym_id in ${gym_chain_ids[@]+"${gym_chain_ids[@]}"}; do
  [[ ! $gym_id =~ ^[0-9]+(_[0-9]+)?$ ]] || printf '%s\t%s\t%s\n' "$gym_run" math "$gym_id" >>"$gym_cancel_list"
done

)
if [ -s "$gym_cancel_list" ]; then
  # The tasks of one job array as one word (ID_[1,5,7]): slurmctld cancels them at once, where it
  # takes a request per word.
  gym_out=$(awk -F'\t' '
    seen[$3]++ { next }
    # Tested with "in" before the element is assigned: mawk makes it while reading the assignment.
    $3 ~ /_/ { split($3, p, "_"); if (p[1] in tasks) tasks[p[1]] = tasks[p[1]] "," p[2]; else tasks[p[1]] = p[2]; next }
    { print $3 }
    END { for (a in tasks) print a "_[" tasks[a] "]" }
  ' "$gym_cancel_list" | xargs scancel 2>&1) ||
    printf '%s\n' "$gym_out" | awk -F'\t' -v rm=__GYM_RUN: -v cm=__GYM_CANCEL_FAILED: '
      NR == FNR {
        if (NF == 0) next
        spoke = 1
        if (/Invalid job id|already completing or completed/) next
        # The tasks of an array were asked as one word (ID_[i,j]): its refusal refuses each of them.
        if (match($0, /job id [0-9]+_\[/)) array_refused[substr($0, RSTART + 7, RLENGTH - 9)] = 1
        else if (match($0, /job id [0-9]+(_[0-9]+)?/)) refused[substr($0, RSTART + 7, RLENGTH - 7)] = 1
        else all = 1
        next
      }
      (all || !spoke || $3 in refused || (split($3, p, "_") == 2 && p[1] in array_refused)) && !said[$1 FS $2]++ {
        print rm $1; print cm $2
      }
    ' - "$gym_cancel_list"
fi
true
