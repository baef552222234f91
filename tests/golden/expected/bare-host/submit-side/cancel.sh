gym_cancel_list=$(mktemp) || exit 1
trap 'rm -f "$gym_cancel_list"' EXIT
gym_run=0
printf '%s%s\n' __GYM_RUN: "$gym_run"
(
mkdir -p /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/4000 && date -u +%Y-%m-%dT%H:%M:%SZ >/lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/4000/cancelled
date -u +%Y-%m-%dT%H:%M:%SZ >/lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/cancelled
{ echo 4000; awk -F'\t' '$1 == "start" || $1 == "successor" || $1 == "resubmit" {print $2}' /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/chain 2>/dev/null; } |
  awk -v run="$gym_run" -v bench=b '/^[0-9]+$/ && !seen[$0]++ { print run "\t" bench "\t" $0 }' >>"$gym_cancel_list"

)
if [ -s "$gym_cancel_list" ]; then
  gym_out=$(awk -F'\t' '!seen[$3]++ { print $3 }' "$gym_cancel_list" | xargs scancel 2>&1) ||
    printf '%s\n' "$gym_out" | awk -F'\t' -v rm=__GYM_RUN: -v cm=__GYM_CANCEL_FAILED: '
      NR == FNR {
        if (NF == 0) next
        spoke = 1
        if (/Invalid job id|already completing or completed/) next
        if (match($0, /job id [0-9]+/)) refused[substr($0, RSTART + 7, RLENGTH - 7)] = 1; else all = 1
        next
      }
      (all || !spoke || $3 in refused) && !said[$1 FS $2]++ { print rm $1; print cm $2 }
    ' - "$gym_cancel_list"
fi
true
