printf '%s\n' __GYM_RUN:0
(
mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/4000 && date -u +%Y-%m-%dT%H:%M:%SZ >/lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/4000/cancelled
date -u +%Y-%m-%dT%H:%M:%SZ >/lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/cancelled
for id in $({ echo 4000; awk -F'\t' '$1 == "start" || $1 == "successor" || $1 == "resubmit" {print $2}' /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/chain 2>/dev/null; } | awk '!seen[$0]++'); do
  case $(scontrol show job -o "$id" 2>/dev/null | head -n 1 | grep -o 'JobState=[A-Z_]*') in
    JobState=COMPLETED | JobState=FAILED | JobState=CANCELLED | JobState=TIMEOUT | JobState=NODE_FAIL | JobState=PREEMPTED | JobState=BOOT_FAIL | JobState=DEADLINE | JobState=OUT_OF_MEMORY) ;;
    *) out=$(scancel "$id" 2>&1) || case $out in *'Invalid job id'*) ;; *) echo __GYM_CANCEL_FAILED:b ;; esac ;;
  esac
done

)
true
