# shellcheck disable=SC2016
gym_projection='<shipping.inline(Program.PROJECTION)>'
if ! { command -v python3 >/dev/null 2>&1 && python3 -c "$gym_projection" __GYM_ROLLOUTS: reward '=__GYM_RUN:0' a /lustre/runs/gym-job-20260101T000000Z-000000/a/artifacts/rollouts.jsonl /lustre/runs/gym-job-20260101T000000Z-000000/a/artifacts/rollouts_materialized_inputs.jsonl b /lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/rollouts.jsonl /lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/rollouts_materialized_inputs.jsonl; }; then
  printf '%s\n' __GYM_RUN:0
  [ -f /lustre/runs/gym-job-20260101T000000Z-000000/a/artifacts/rollouts.jsonl ] && { printf '%s%s\x1f%s\x1fraw\x1f\x1f' __GYM_ROLLOUTS: a rollouts; cut -b 1-67108865 /lustre/runs/gym-job-20260101T000000Z-000000/a/artifacts/rollouts.jsonl | base64 -w0; echo; }
  [ -f /lustre/runs/gym-job-20260101T000000Z-000000/a/artifacts/rollouts_materialized_inputs.jsonl ] && { printf '%s%s\x1f%s\x1fraw\x1f\x1f' __GYM_ROLLOUTS: a expected; cut -b 1-67108865 /lustre/runs/gym-job-20260101T000000Z-000000/a/artifacts/rollouts_materialized_inputs.jsonl | base64 -w0; echo; }
  [ -f /lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/rollouts.jsonl ] && { printf '%s%s\x1f%s\x1fraw\x1f\x1f' __GYM_ROLLOUTS: b rollouts; cut -b 1-67108865 /lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/rollouts.jsonl | base64 -w0; echo; }
  [ -f /lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/rollouts_materialized_inputs.jsonl ] && { printf '%s%s\x1f%s\x1fraw\x1f\x1f' __GYM_ROLLOUTS: b expected; cut -b 1-67108865 /lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/rollouts_materialized_inputs.jsonl | base64 -w0; echo; }
fi
printf '%s\n' __GYM_RUN:0
p="$(for f in /lustre/runs/gym-job-20260101T000000Z-000000/a/.gym/provenance /lustre/runs/gym-job-20260101T000000Z-000000/a/shards/*/.gym/provenance; do [ -f "$f" ] && tail -c 4096 "$f"; done 2>/dev/null | tail -c 4096 | base64 -w0)"; [ -z "$p" ] || printf '%s%s\x1f%s\n' __GYM_PROVENANCE: a "$p"
for f in /lustre/runs/gym-job-20260101T000000Z-000000/a/artifacts/*aggregate_metrics*.json; do [ -f "$f" ] || continue; if [ "$(wc -c <"$f")" -gt 16777216 ]; then p='!too-large'; else p="$(base64 -w0 <"$f")"; fi; printf '%s%s\x1f\x1f%s\x1f%s\n' __GYM_RESULT: a "$f" "$p"; done
p="$(for f in /lustre/runs/gym-job-20260101T000000Z-000000/b/.gym/provenance /lustre/runs/gym-job-20260101T000000Z-000000/b/shards/*/.gym/provenance; do [ -f "$f" ] && tail -c 4096 "$f"; done 2>/dev/null | tail -c 4096 | base64 -w0)"; [ -z "$p" ] || printf '%s%s\x1f%s\n' __GYM_PROVENANCE: b "$p"
for f in /lustre/runs/gym-job-20260101T000000Z-000000/b/artifacts/*aggregate_metrics*.json; do [ -f "$f" ] || continue; if [ "$(wc -c <"$f")" -gt 16777216 ]; then p='!too-large'; else p="$(base64 -w0 <"$f")"; fi; printf '%s%s\x1f\x1f%s\x1f%s\n' __GYM_RESULT: b "$f" "$p"; done
true
