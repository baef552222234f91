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
{ [ -d /mnt/gym-results/gym-job-20260101T000000Z-000000/first/.gym/4000 ] || mkdir -p /mnt/gym-results/gym-job-20260101T000000Z-000000/first/.gym/4000; } && printf '%s\n' "$gym_now" >/mnt/gym-results/gym-job-20260101T000000Z-000000/first/.gym/4000/cancelled
kubectl --context=gpu-cluster --namespace=gym-evals --request-timeout=30s delete job 4000 --ignore-not-found --wait=false --cascade=foreground >/dev/null 2>&1 || printf '%s\n' __GYM_CANCEL_FAILED:first

{ [ -d /mnt/gym-results/gym-job-20260101T000000Z-000000/second/.gym/4001 ] || mkdir -p /mnt/gym-results/gym-job-20260101T000000Z-000000/second/.gym/4001; } && printf '%s\n' "$gym_now" >/mnt/gym-results/gym-job-20260101T000000Z-000000/second/.gym/4001/cancelled
kubectl --context=gpu-cluster --namespace=gym-evals --request-timeout=30s delete job 4001 --ignore-not-found --wait=false --cascade=foreground >/dev/null 2>&1 || printf '%s\n' __GYM_CANCEL_FAILED:second


)

true
