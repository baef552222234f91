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
if mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/.gym && printf '%s\n' /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1 /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/2 /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/3 >/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/.gym/array-manifest &&
  cat >/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/.gym/array.sh <<'GYM_ARRAY_EOF'
#!/bin/bash
#SBATCH --job-name=gym-array
#SBATCH --account=acct
#SBATCH --partition=batch
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --output=/lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/.gym/array-%A_%a.out
# gym orchestration: a job array of 3 jobs; task N runs the job on line N+1 of its manifest.
set -u
gym_task=${SLURM_ARRAY_TASK_ID:?this script runs as a task of a Slurm job array}
gym_dir=$(sed -n "$((gym_task + 1))p" /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/.gym/array-manifest)
if [ -z "$gym_dir" ] || ! cd "$gym_dir"; then
    echo "gym array task $gym_task: no job directory on line $((gym_task + 1)) of" /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/.gym/array-manifest >&2
    exit 1
fi
export GYM_ARRAY_TASK_JOB_ID="${SLURM_ARRAY_JOB_ID}_${gym_task}"
exec bash ./job.sh >>"slurm-${SLURM_ARRAY_JOB_ID}_${gym_task}.out" 2>&1
GYM_ARRAY_EOF
then
  gym_array_out_0=$(GYM_GOLDEN_SECRET=golden-secret-value sbatch --parsable --array=0-2 /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/.gym/array.sh 2>&1); gym_array_rc_0=$?
else
  gym_array_out_0='could not write the job array script /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/.gym/array.sh'; gym_array_rc_0=1
fi
gym_array_id_0=${gym_array_out_0%"${gym_array_out_0##*[![:space:]]}"}
gym_array_id_0=${gym_array_id_0##*[[:space:]]}
gym_array_id_0=${gym_array_id_0%%;*}
[[ $gym_array_id_0 =~ ^[0-9]+$ ]] || { gym_array_id_0=""; [ "$gym_array_rc_0" -ne 0 ] || gym_array_rc_0=1; }
printf '%s\n' __GYM_RUN:gym-job-20260101T000000Z-000000
(
export GYM_GOLDEN_SECRET=golden-secret-value
mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/logs /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/1/.gym /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/2/logs /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/2/.gym /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/3/logs /lustre/runs/gym-job-20260101T000000Z-000000/answer-judge/shards/3/.gym /lustre/runs/gym-job-20260101T000000Z-000000/math/logs /lustre/runs/gym-job-20260101T000000Z-000000/math/.gym
out=$gym_array_out_0; rc=$gym_array_rc_0; [ "$rc" -ne 0 ] || out="${gym_array_id_0}_0"
printf -v line '%s%s:%s:%s' __GYM_JOB: answer-judge@1 "$rc" "${out//$'\n'/ }"
printf '%s\n' "$line" >>/lustre/runs/gym-job-20260101T000000Z-000000/.gym-submitted
printf '%s\n' "$line"
out=$gym_array_out_0; rc=$gym_array_rc_0; [ "$rc" -ne 0 ] || out="${gym_array_id_0}_1"
printf -v line '%s%s:%s:%s' __GYM_JOB: answer-judge@2 "$rc" "${out//$'\n'/ }"
printf '%s\n' "$line" >>/lustre/runs/gym-job-20260101T000000Z-000000/.gym-submitted
printf '%s\n' "$line"
out=$gym_array_out_0; rc=$gym_array_rc_0; [ "$rc" -ne 0 ] || out="${gym_array_id_0}_2"
printf -v line '%s%s:%s:%s' __GYM_JOB: answer-judge@3 "$rc" "${out//$'\n'/ }"
printf '%s\n' "$line" >>/lustre/runs/gym-job-20260101T000000Z-000000/.gym-submitted
printf '%s\n' "$line"
out=$(sbatch --parsable /lustre/runs/gym-job-20260101T000000Z-000000/math/job.sh 2>&1); rc=$?
printf -v line '%s%s:%s:%s' __GYM_JOB: math "$rc" "${out//$'\n'/ }"
printf '%s\n' "$line" >>/lustre/runs/gym-job-20260101T000000Z-000000/.gym-submitted
printf '%s\n' "$line"
)
printf '%s\n' __GYM_SUBMISSION_ENDED >>/lustre/runs/gym-job-20260101T000000Z-000000/.gym-submitted
}
