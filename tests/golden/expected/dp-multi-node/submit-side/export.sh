set -u
cd / || exit 1
gym_exporters() {
python3 - "$@" <<'__GYM_EXPORTERS_END__'
<shipping.inline(Program.EXPORTERS)>
__GYM_EXPORTERS_END__
}
if [ -f /lustre/runs/gym-job-20260101T000000Z-000000/b1/steps/exporters/export-spec.json ]; then gym_exporters /lustre/runs/gym-job-20260101T000000Z-000000/b1 --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:b1''/'; else printf '%s%s\n' '__GYM_EXPORT:b1' __none__; fi
if [ -f /lustre/runs/gym-job-20260101T000000Z-000000/b2/steps/exporters/export-spec.json ]; then gym_exporters /lustre/runs/gym-job-20260101T000000Z-000000/b2 --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:b2''/'; else printf '%s%s\n' '__GYM_EXPORT:b2' __none__; fi
