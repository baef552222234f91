{
set -u
umask 022
trap '' HUP PIPE
gym_exists=0
if [ -e /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000 ]; then echo __GYM_EXISTS:/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000; gym_exists=1; fi
[ "$gym_exists" -eq 0 ] || exit 4
gym_made=()
gym_parents=()
[ -e /tmp/gym-golden-runs ] || gym_parents+=(/tmp/gym-golden-runs)
[ -e /tmp ] || gym_parents+=(/tmp)
gym_unmake() { rm -rf ${gym_made[@]+"${gym_made[@]}"}; for d in ${gym_parents[@]+"${gym_parents[@]}"}; do rmdir "$d" 2>/dev/null; done; exit 5; }
mkdir -p /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000 || gym_unmake
gym_made+=(/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000)
base64 -d <<'GYM_TAR_EOF' | tar -xzf - -C /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000 || gym_unmake
<the staged files, tar.gz, base64>
GYM_TAR_EOF
# Held while this script queues (released as it ends, however it ends): what a lost connection's
# recovery asks before it believes the logs are whole.
if command -v flock >/dev/null 2>&1 && exec 9>>/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/.gym-submitting; then flock -n 9 || :; fi
printf '%s\n' __GYM_RUN:gym-job-20260101T000000Z-000000
(
export GYM_GOLDEN_SECRET=golden-secret-value
setsid nohup bash /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/run-local.sh >/dev/null 2>&1 </dev/null &
printf '%s%s:0:%s\n' __GYM_JOB: first local-000000-1
printf '%s%s:0:%s\n' __GYM_JOB: second local-000000-2
)
printf '%s\n' __GYM_SUBMISSION_ENDED >>/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/.gym-submitted
}
