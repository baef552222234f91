# shellcheck disable=SC2016
gym_projection='<facts.py and rollout_projection.py>'
if ! { command -v python3 >/dev/null 2>&1 && python3 -c "$gym_projection" __GYM_ROLLOUTS: reward '=__GYM_RUN:0' first /mnt/gym-results/gym-job-20260101T000000Z-000000/first/artifacts/rollouts.jsonl /mnt/gym-results/gym-job-20260101T000000Z-000000/first/artifacts/rollouts_materialized_inputs.jsonl second /mnt/gym-results/gym-job-20260101T000000Z-000000/second/artifacts/rollouts.jsonl /mnt/gym-results/gym-job-20260101T000000Z-000000/second/artifacts/rollouts_materialized_inputs.jsonl; }; then
  printf '%s\n' __GYM_RUN:0
  [ -f /mnt/gym-results/gym-job-20260101T000000Z-000000/first/artifacts/rollouts.jsonl ] && { printf '%s%s\x1f%s\x1fraw\x1f\x1f' __GYM_ROLLOUTS: first rollouts; base64 -w0 </mnt/gym-results/gym-job-20260101T000000Z-000000/first/artifacts/rollouts.jsonl; echo; }
  [ -f /mnt/gym-results/gym-job-20260101T000000Z-000000/first/artifacts/rollouts_materialized_inputs.jsonl ] && { printf '%s%s\x1f%s\x1fraw\x1f\x1f' __GYM_ROLLOUTS: first expected; base64 -w0 </mnt/gym-results/gym-job-20260101T000000Z-000000/first/artifacts/rollouts_materialized_inputs.jsonl; echo; }
  [ -f /mnt/gym-results/gym-job-20260101T000000Z-000000/second/artifacts/rollouts.jsonl ] && { printf '%s%s\x1f%s\x1fraw\x1f\x1f' __GYM_ROLLOUTS: second rollouts; base64 -w0 </mnt/gym-results/gym-job-20260101T000000Z-000000/second/artifacts/rollouts.jsonl; echo; }
  [ -f /mnt/gym-results/gym-job-20260101T000000Z-000000/second/artifacts/rollouts_materialized_inputs.jsonl ] && { printf '%s%s\x1f%s\x1fraw\x1f\x1f' __GYM_ROLLOUTS: second expected; base64 -w0 </mnt/gym-results/gym-job-20260101T000000Z-000000/second/artifacts/rollouts_materialized_inputs.jsonl; echo; }
fi
printf '%s\n' __GYM_RUN:0
p="$(for f in /mnt/gym-results/gym-job-20260101T000000Z-000000/first/.gym/provenance /mnt/gym-results/gym-job-20260101T000000Z-000000/first/shards/*/.gym/provenance; do [ -f "$f" ] && tail -c 4096 "$f"; done 2>/dev/null | tail -c 4096 | base64 -w0)"; [ -z "$p" ] || printf '%s%s\x1f%s\n' __GYM_PROVENANCE: first "$p"
for f in /mnt/gym-results/gym-job-20260101T000000Z-000000/first/artifacts/*aggregate_metrics*.json; do [ -f "$f" ] || continue; if [ "$(wc -c <"$f")" -gt 16777216 ]; then p='!too-large'; else p="$(base64 -w0 <"$f")"; fi; printf '%s%s\x1f\x1f%s\x1f%s\n' __GYM_RESULT: first "$f" "$p"; done
p="$(for f in /mnt/gym-results/gym-job-20260101T000000Z-000000/second/.gym/provenance /mnt/gym-results/gym-job-20260101T000000Z-000000/second/shards/*/.gym/provenance; do [ -f "$f" ] && tail -c 4096 "$f"; done 2>/dev/null | tail -c 4096 | base64 -w0)"; [ -z "$p" ] || printf '%s%s\x1f%s\n' __GYM_PROVENANCE: second "$p"
for f in /mnt/gym-results/gym-job-20260101T000000Z-000000/second/artifacts/*aggregate_metrics*.json; do [ -f "$f" ] || continue; if [ "$(wc -c <"$f")" -gt 16777216 ]; then p='!too-large'; else p="$(base64 -w0 <"$f")"; fi; printf '%s%s\x1f\x1f%s\x1f%s\n' __GYM_RESULT: second "$f" "$p"; done
true
