{
set -u
umask 022
trap '' HUP PIPE
gym_exists=0
if [ -e /lustre/runs/gym-job-20260101T000000Z-000000 ]; then echo __GYM_EXISTS:/lustre/runs/gym-job-20260101T000000Z-000000; gym_exists=1; fi
[ "$gym_exists" -eq 0 ] || exit 4
gym_made=()
gym_parents=()
[ -e /lustre/runs ] || gym_parents+=(/lustre/runs)
[ -e /lustre ] || gym_parents+=(/lustre)
gym_unmake() { rm -rf ${gym_made[@]+"${gym_made[@]}"}; for d in ${gym_parents[@]+"${gym_parents[@]}"}; do rmdir "$d" 2>/dev/null; done; exit 5; }
mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000 || gym_unmake
gym_made+=(/lustre/runs/gym-job-20260101T000000Z-000000)
base64 -d <<'GYM_TAR_EOF' | tar -xzf - -C /lustre/runs/gym-job-20260101T000000Z-000000 || gym_unmake
<the staged files, tar.gz, base64>
GYM_TAR_EOF
# Held while this script queues (released as it ends, however it ends): what a lost connection's
# recovery asks before it believes the logs are whole.
if command -v flock >/dev/null 2>&1 && exec 9>>/lustre/runs/gym-job-20260101T000000Z-000000/.gym-submitting; then flock -n 9 || :; fi
printf '%s\n' __GYM_RUN:gym-job-20260101T000000Z-000000
(
export GYM_GOLDEN_SECRET=golden-secret-value
mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment/logs /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment/.gym
out=$(sbatch --parsable /lustre/runs/gym-job-20260101T000000Z-000000/shared-deployment/job.sh 2>&1); rc=$?
printf -v line '%s%s:%s:%s' __GYM_JOB: shared-deployment "$rc" "${out//$'\n'/ }"
printf '%s\n' "$line" >>/lustre/runs/gym-job-20260101T000000Z-000000/.gym-submitted
printf '%s\n' "$line"
)
printf '%s\n' __GYM_SUBMISSION_ENDED >>/lustre/runs/gym-job-20260101T000000Z-000000/.gym-submitted
}
