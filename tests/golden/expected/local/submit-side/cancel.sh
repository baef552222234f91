gym_cancel_list=$(mktemp) || exit 1
trap 'rm -f "$gym_cancel_list"' EXIT
gym_run=0
printf '%s%s\n' __GYM_RUN: "$gym_run"
(
mkdir -p /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/4000 && date -u +%Y-%m-%dT%H:%M:%SZ >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/4000/cancelled
[ -f /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/4000/pid ] && kill -TERM "$(cat /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/.gym/4000/pid)" 2>/dev/null; true
mkdir -p /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/4001 && date -u +%Y-%m-%dT%H:%M:%SZ >/tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/4001/cancelled
[ -f /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/4001/pid ] && kill -TERM "$(cat /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/.gym/4001/pid)" 2>/dev/null; true

)

true
