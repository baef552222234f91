set -u
cd / || exit 1
gym_exporters() {
python3 - "$@" <<'__GYM_EXPORTERS_END__'
<shipping.inline(Program.EXPORTERS)>
__GYM_EXPORTERS_END__
}
if [ -f /lustre/runs/gym-job-20260101T000000Z-000000/long/steps/exporters/export-spec.json ]; then gym_exporters /lustre/runs/gym-job-20260101T000000Z-000000/long --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:long''/'; else printf '%s%s\n' '__GYM_EXPORT:long' __none__; fi
if [ -f /lustre/runs/gym-job-20260101T000000Z-000000/short/steps/exporters/export-spec.json ]; then gym_exporters /lustre/runs/gym-job-20260101T000000Z-000000/short --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:short''/'; else printf '%s%s\n' '__GYM_EXPORT:short' __none__; fi
