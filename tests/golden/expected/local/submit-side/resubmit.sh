set -u
umask 022
gym_missing_inputs() { return 1; }
printf '%s\n' __GYM_RUN:gym-job-20260101T000000Z-000000
(
    export GYM_GOLDEN_SECRET=golden-secret-value
    # first: attempt 2, generate-missing after job 4000
    gym_d=/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first
    gym_a="$gym_d/.gym/attempts/2"
    gym_ok=1
    if ! mkdir -p "$gym_a/earlier"; then
        printf '%s:1:%s\n' __GYM_JOB:first "cannot write $gym_a"
        gym_ok=0
    fi
    if [ "$gym_ok" -eq 1 ]; then
        for gym_kept in artifacts .gym/exports .gym/cancelled; do
            if [ -e "$gym_d/$gym_kept" ] && ! cp -a "$gym_d/$gym_kept" "$gym_a/earlier/"; then
                printf '%s:1:%s\n' __GYM_JOB:first "could not keep $gym_kept aside in $gym_a; nothing queued"
                gym_ok=0
                break
            fi
        done
    fi
    if [ "$gym_ok" -eq 1 ]; then
        gym_n=$(gym_missing_inputs "$gym_d" "$gym_a/inputs.jsonl") || gym_n=''
        printf '%s:%s\n' __GYM_INPUTS:first "$gym_n"
        if [ -z "$gym_n" ] || [ "$gym_n" = 0 ]; then
            printf '%s:1:%s\n' __GYM_JOB:first "no missing rows could be listed from its materialized inputs; nothing queued"
            gym_ok=0
        fi
    fi
    if [ "$gym_ok" -eq 1 ]; then
        # The earlier attempt's cancel was not this one's (kept aside above).
        rm -f "$gym_d/.gym/cancelled"
        : >"$gym_d/.gym/continue"
        gym_id=4000.2; gym_rc=0; gym_out=$gym_id
        if [ -n "$gym_id" ]; then
            printf 'resubmit\t%s\t%s\t%s\t%s\n' "$gym_id" 4000 2 generate-missing >>"$gym_d/.gym/chain"
            true || printf '%s\n' __GYM_NOT_RELEASED:first
            printf '%s:0:%s\n' __GYM_JOB:first "$gym_id"
        else
            printf '%s:%s:%s\n' __GYM_JOB:first "$gym_rc" "$(printf '%s' "$gym_out" | tr '\n' ' ')"
        fi
    fi
    # second: attempt 2, requeue after job 4001
    gym_d=/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second
    gym_a="$gym_d/.gym/attempts/2"
    gym_ok=1
    if ! mkdir -p "$gym_a/earlier"; then
        printf '%s:1:%s\n' __GYM_JOB:second "cannot write $gym_a"
        gym_ok=0
    fi
    if [ "$gym_ok" -eq 1 ]; then
        for gym_kept in artifacts .gym/exports .gym/cancelled; do
            if [ -e "$gym_d/$gym_kept" ] && ! cp -a "$gym_d/$gym_kept" "$gym_a/earlier/"; then
                printf '%s:1:%s\n' __GYM_JOB:second "could not keep $gym_kept aside in $gym_a; nothing queued"
                gym_ok=0
                break
            fi
        done
    fi
    if [ "$gym_ok" -eq 1 ]; then
        # The earlier attempt's cancel was not this one's (kept aside above).
        rm -f "$gym_d/.gym/cancelled"
        : >"$gym_d/.gym/continue"
        gym_id=4001.2; gym_rc=0; gym_out=$gym_id
        if [ -n "$gym_id" ]; then
            printf 'resubmit\t%s\t%s\t%s\t%s\n' "$gym_id" 4001 2 requeue >>"$gym_d/.gym/chain"
            true || printf '%s\n' __GYM_NOT_RELEASED:second
            printf '%s:0:%s\n' __GYM_JOB:second "$gym_id"
        else
            printf '%s:%s:%s\n' __GYM_JOB:second "$gym_rc" "$(printf '%s' "$gym_out" | tr '\n' ' ')"
        fi
    fi
    printf '%s\n' $'#!/bin/bash\n# Local runner of run gym-job-20260101T000000Z-000000: the benchmarks\' jobs one after another on this machine\n# (they would share its ports and GPUs), each with its own id, log and state, as under Slurm.\nset -u\necho $$ >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/.gym-runner.pid\nmkdir -p /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/4000.2\nprintf \'phase=queued\\ndetail=waiting for the jobs before it\\n\' >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/4000.2/state\nmkdir -p /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/4001.2\nprintf \'phase=queued\\ndetail=waiting for the jobs before it\\n\' >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/4001.2/state\n\n# Local runs take turns on this machine, whoever submitted them: their servers bind the same ports\n# and share its GPUs. The lock is held by this shell alone (the jobs get no copy of it), and while\n# it waits each job says which run it waits for.\ngym_lock=${GYM_LOCAL_LOCK:-/tmp/gym-orchestration-local.lock}\n(umask 0 && : >>"$gym_lock") 2>/dev/null\nexec 9<"$gym_lock" || { echo "cannot open the machine\'s local-run lock $gym_lock" >&2; exit 1; }\nwhile ! flock -n 9; do\n    # Each user writes a holder file of their own (another user\'s file in /tmp may not be theirs\n    # to write); the newest names the holder.\n    # shellcheck disable=SC2012  # names we made: no odd characters\n    gym_holder=$(ls -t "$gym_lock".holder.* 2>/dev/null | head -n 1)\n    gym_holder=$( [ -n "$gym_holder" ] && head -c 300 "$gym_holder" | head -n 1 | tr -cd \'[:print:]\')\n    printf \'phase=queued\\ndetail=queued behind run %s (local runs take turns on this machine)\\n\' "${gym_holder:-another run}" >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/4000.2/state\n    printf \'phase=queued\\ndetail=queued behind run %s (local runs take turns on this machine)\\n\' "${gym_holder:-another run}" >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/4001.2/state\n    sleep 2\ndone\nprintf \'%s\\n\' gym-job-20260101T000000Z-000000 >"$gym_lock.holder.$(id -u)" 2>/dev/null\n# Queued by gym eval resubmit: only a job its benchmark\'s chain records runs.\nif ! awk -F\'\\t\' \'$1 == "resubmit" && $2 == "4000.2" { found = 1 } END { exit !found }\' /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/chain 2>/dev/null; then\n    :\nelif [ -e /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/4000.2/cancelled ]; then\n    printf \'phase=cancelled\\ndetail=cancelled before it started\\n\' >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/4000.2/state\nelse\n    GYM_JOB_ID=4000.2 bash /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/job.sh >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/slurm-4000.2.out 2>&1 </dev/null 9<&-\nfi\n# Queued by gym eval resubmit: only a job its benchmark\'s chain records runs.\nif ! awk -F\'\\t\' \'$1 == "resubmit" && $2 == "4001.2" { found = 1 } END { exit !found }\' /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/chain 2>/dev/null; then\n    :\nelif [ -e /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/4001.2/cancelled ]; then\n    printf \'phase=cancelled\\ndetail=cancelled before it started\\n\' >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/4001.2/state\nelse\n    GYM_JOB_ID=4001.2 bash /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/job.sh >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/slurm-4001.2.out 2>&1 </dev/null 9<&-\nfi\n' | setsid nohup bash -s >/dev/null 2>&1 &
)
true
