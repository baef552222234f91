set -u
cd / || exit 1
gym_exporters() {
python3 - "$@" <<'__GYM_EXPORTERS_END__'
<shipping.inline(Program.EXPORTERS)>
__GYM_EXPORTERS_END__
}
if [ -f /lustre/gym-runs/gym-job-20260101T000000Z-000000/answer-judge/steps/exporters/export-spec.json ]; then gym_exporters /lustre/gym-runs/gym-job-20260101T000000Z-000000/answer-judge --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:answer-judge''/'; else printf '%s%s\n' '__GYM_EXPORT:answer-judge' __none__; fi
