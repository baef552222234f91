#!/bin/bash
# Local runner of run gym-job-20260101T000000Z-000000: the benchmarks' jobs one after another on this machine
# (they would share its ports and GPUs), each with its own id, log and state, as under Slurm.
set -u
echo $$ >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/.gym-runner.pid
mkdir -p /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/local-000000-1
printf 'phase=queued\ndetail=waiting for the jobs before it\n' >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/local-000000-1/state
mkdir -p /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/local-000000-2
printf 'phase=queued\ndetail=waiting for the jobs before it\n' >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/local-000000-2/state

# Local runs take turns on this machine, whoever submitted them: their servers bind the same ports
# and share its GPUs. The lock is held by this shell alone (the jobs get no copy of it), and while
# it waits each job says which run it waits for.
gym_lock=${GYM_LOCAL_LOCK:-/tmp/gym-orchestration-local.lock}
(umask 0 && : >>"$gym_lock") 2>/dev/null
exec 9<"$gym_lock" || { echo "cannot open the machine's local-run lock $gym_lock" >&2; exit 1; }
while ! flock -n 9; do
    # Each user writes a holder file of their own (another user's file in /tmp may not be theirs
    # to write); the newest names the holder.
    # shellcheck disable=SC2012  # names we made: no odd characters
    gym_holder=$(ls -t "$gym_lock".holder.* 2>/dev/null | head -n 1)
    gym_holder=$( [ -n "$gym_holder" ] && head -c 300 "$gym_holder" | head -n 1 | tr -cd '[:print:]')
    printf 'phase=queued\ndetail=queued behind run %s (local runs take turns on this machine)\n' "${gym_holder:-another run}" >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/local-000000-1/state
    printf 'phase=queued\ndetail=queued behind run %s (local runs take turns on this machine)\n' "${gym_holder:-another run}" >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/local-000000-2/state
    sleep 2
done
printf '%s\n' gym-job-20260101T000000Z-000000 >"$gym_lock.holder.$(id -u)" 2>/dev/null
if [ -e /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/local-000000-1/cancelled ]; then
    printf 'phase=cancelled\ndetail=cancelled before it started\n' >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/local-000000-1/state
else
    GYM_JOB_ID=local-000000-1 bash /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/job.sh >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/slurm-local-000000-1.out 2>&1 </dev/null 9<&-
fi
if [ -e /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/local-000000-2/cancelled ]; then
    printf 'phase=cancelled\ndetail=cancelled before it started\n' >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/local-000000-2/state
else
    GYM_JOB_ID=local-000000-2 bash /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/job.sh >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/slurm-local-000000-2.out 2>&1 </dev/null 9<&-
fi
