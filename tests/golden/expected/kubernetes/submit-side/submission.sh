{
set -u
umask 022
trap '' HUP PIPE
gym_exists=0
if [ -e /mnt/gym-results/gym-job-20260101T000000Z-000000 ]; then echo __GYM_EXISTS:/mnt/gym-results/gym-job-20260101T000000Z-000000; gym_exists=1; fi
[ "$gym_exists" -eq 0 ] || exit 4
gym_made=()
gym_parents=()
[ -e /mnt/gym-results ] || gym_parents+=(/mnt/gym-results)
[ -e /mnt ] || gym_parents+=(/mnt)
gym_unmake() { rm -rf ${gym_made[@]+"${gym_made[@]}"}; for d in ${gym_parents[@]+"${gym_parents[@]}"}; do rmdir "$d" 2>/dev/null; done; exit 5; }
mkdir -p /mnt/gym-results/gym-job-20260101T000000Z-000000 || gym_unmake
gym_made+=(/mnt/gym-results/gym-job-20260101T000000Z-000000)
base64 -d <<'GYM_TAR_EOF' | tar -xzf - -C /mnt/gym-results/gym-job-20260101T000000Z-000000 || gym_unmake
<the staged files, tar.gz, base64>
GYM_TAR_EOF
# Held while this script queues (released as it ends, however it ends): what a lost connection's
# recovery asks before it believes the logs are whole.
if command -v flock >/dev/null 2>&1 && exec 9>>/mnt/gym-results/gym-job-20260101T000000Z-000000/.gym-submitting; then flock -n 9 || :; fi
printf '%s\n' __GYM_RUN:gym-job-20260101T000000Z-000000
(
export GYM_GOLDEN_SECRET=golden-secret-value
out=$(timeout 60 kubectl --context=gpu-cluster --namespace=gym-evals --request-timeout=30s apply -f /mnt/gym-results/gym-job-20260101T000000Z-000000/first/job.yaml 2>&1); rc=$?
[ "$rc" -ne 0 ] || out=gym-job-20260101t000000z-000000-first
printf -v line '%s%s:%s:%s' __GYM_JOB: first "$rc" "${out//$'\n'/ }"
printf '%s\n' "$line" >>/mnt/gym-results/gym-job-20260101T000000Z-000000/.gym-submitted
printf '%s\n' "$line"
out=$(timeout 60 kubectl --context=gpu-cluster --namespace=gym-evals --request-timeout=30s apply -f /mnt/gym-results/gym-job-20260101T000000Z-000000/second/job.yaml 2>&1); rc=$?
[ "$rc" -ne 0 ] || out=gym-job-20260101t000000z-000000-second
printf -v line '%s%s:%s:%s' __GYM_JOB: second "$rc" "${out//$'\n'/ }"
printf '%s\n' "$line" >>/mnt/gym-results/gym-job-20260101T000000Z-000000/.gym-submitted
printf '%s\n' "$line"
)
printf '%s\n' __GYM_SUBMISSION_ENDED >>/mnt/gym-results/gym-job-20260101T000000Z-000000/.gym-submitted
}
