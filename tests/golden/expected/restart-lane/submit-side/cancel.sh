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
[ ! -d /lustre/runs/gym-job-20260101T000000Z-000000/a/.gym/4000 ] || printf '%s\n' "$gym_now" >/lustre/runs/gym-job-20260101T000000Z-000000/a/.gym/4000/cancelled
{ [ -d /lustre/runs/gym-job-20260101T000000Z-000000/a/.gym ] || mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/a/.gym; } && printf '%s\n' "$gym_now" >/lustre/runs/gym-job-20260101T000000Z-000000/a/.gym/cancelled
gym_chain_text=''; gym_slurp gym_chain_text /lustre/runs/gym-job-20260101T000000Z-000000/a/.gym/chain; gym_chain_of 4000 "$gym_chain_text"
for gym_id in ${gym_chain_ids[@]+"${gym_chain_ids[@]}"}; do
  [[ ! $gym_id =~ ^[0-9]+(_[0-9]+)?$ ]] || printf '%s\t%s\t%s\n' "$gym_run" a "$gym_id" >>"$gym_cancel_list"
done
[ ! -d /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/4000 ] || printf '%s\n' "$gym_now" >/lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/4000/cancelled
{ [ -d /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym ] || mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym; } && printf '%s\n' "$gym_now" >/lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/cancelled
gym_chain_text=''; gym_slurp gym_chain_text /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/chain; gym_chain_of 4000 "$gym_chain_text"
for gym_id in ${gym_chain_ids[@]+"${gym_chain_ids[@]}"}; do
  [[ ! $gym_id =~ ^[0-9]+(_[0-9]+)?$ ]] || printf '%s\t%s\t%s\n' "$gym_run" b "$gym_id" >>"$gym_cancel_list"
done

)
gym_slurm_host='<shipping.inline(Program.SCHEDULER_HOST)>'
gym_out=''
if [ -s "$gym_cancel_list" ]; then
  # The words and whose cancel a failure refused are the host's Python's (backends/slurm_host.py);
  # without python3 nothing is cancelled, and every cancel asked is refused.
  gym_words=$(python3 -E -s -c "$gym_slurm_host" cancel-words "$gym_cancel_list" 2>&1) &&
    gym_out=$(printf '%s\n' "$gym_words" | xargs scancel 2>&1) ||
    printf '%s\n' "${gym_out:-}" | python3 -E -s -c "$gym_slurm_host" refused __GYM_RUN: __GYM_CANCEL_FAILED: "$gym_cancel_list" ||
    cut -f1,2 "$gym_cancel_list" | sort -u | while IFS=$'\t' read -r gym_r gym_b; do
      printf '%s\n' __GYM_RUN:"$gym_r" __GYM_CANCEL_FAILED:"$gym_b"
    done
fi
true
