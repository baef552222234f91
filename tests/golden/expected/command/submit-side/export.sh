set -u
cd / || exit 1
gym_exporters() {
python3 - "$@" <<'__GYM_EXPORTERS_END__'
<shipping.inline(Program.EXPORTERS)>
__GYM_EXPORTERS_END__
}
if [ -f /lustre/runs/gym-job-20260101T000000Z-000000/run-it/steps/exporters/export-spec.json ]; then gym_exporters /lustre/runs/gym-job-20260101T000000Z-000000/run-it --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:run-it''/'; else printf '%s%s\n' '__GYM_EXPORT:run-it' __none__; fi
if [ -f /lustre/runs/gym-job-20260101T000000Z-000000/scripted/steps/exporters/export-spec.json ]; then gym_exporters /lustre/runs/gym-job-20260101T000000Z-000000/scripted --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:scripted''/'; else printf '%s%s\n' '__GYM_EXPORT:scripted' __none__; fi
