set -u
umask 022
gym_missing_inputs() { return 1; }
printf '%s\n' __GYM_RUN:gym-job-20260101T000000Z-000000
(
    export GYM_GOLDEN_SECRET=golden-secret-value
    # a: attempt 2, generate-missing after job 4000
    gym_d=/lustre/runs/gym-job-20260101T000000Z-000000/a
    gym_a="$gym_d/.gym/attempts/2"
    gym_ok=1
    if ! mkdir -p "$gym_a/earlier"; then
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
        # The earlier attempt's cancel was not this one's (kept aside above).
        rm -f "$gym_d/.gym/cancelled"
        : >"$gym_d/.gym/continue"
        gym_out=$(sbatch --parsable --hold /lustre/runs/gym-job-20260101T000000Z-000000/a/job.sh 2>&1); gym_rc=$?
        gym_id=''; [ "$gym_rc" -eq 0 ] && gym_id=${gym_out%%;*}
        if [ -n "$gym_id" ]; then
            printf 'resubmit\t%s\t%s\t%s\t%s\n' "$gym_id" 4000 2 generate-missing >>"$gym_d/.gym/chain"
            scontrol release "$gym_id" >/dev/null 2>&1 || printf '%s\n' __GYM_NOT_RELEASED:a
            printf '%s:0:%s\n' __GYM_JOB:a "$gym_id"
        else
            printf '%s:%s:%s\n' __GYM_JOB:a "$gym_rc" "$(printf '%s' "$gym_out" | tr '\n' ' ')"
        fi
    fi
    # b: attempt 2, requeue after job 4000
    gym_d=/lustre/runs/gym-job-20260101T000000Z-000000/b
    gym_a="$gym_d/.gym/attempts/2"
    gym_ok=1
    if ! mkdir -p "$gym_a/earlier"; then
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
        # The earlier attempt's cancel was not this one's (kept aside above).
        rm -f "$gym_d/.gym/cancelled"
        : >"$gym_d/.gym/continue"
        gym_out=$(sbatch --parsable --hold /lustre/runs/gym-job-20260101T000000Z-000000/b/job.sh 2>&1); gym_rc=$?
        gym_id=''; [ "$gym_rc" -eq 0 ] && gym_id=${gym_out%%;*}
        if [ -n "$gym_id" ]; then
            printf 'resubmit\t%s\t%s\t%s\t%s\n' "$gym_id" 4000 2 requeue >>"$gym_d/.gym/chain"
            scontrol release "$gym_id" >/dev/null 2>&1 || printf '%s\n' __GYM_NOT_RELEASED:b
            printf '%s:0:%s\n' __GYM_JOB:b "$gym_id"
        else
            printf '%s:%s:%s\n' __GYM_JOB:b "$gym_rc" "$(printf '%s' "$gym_out" | tr '\n' ' ')"
        fi
    fi
)
true
