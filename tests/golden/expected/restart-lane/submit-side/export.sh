set -u
cd / || exit 1
gym_exporters() {
python3 - "$@" <<'__GYM_EXPORTERS_END__'
<shipping.inline(Program.EXPORTERS)>
__GYM_EXPORTERS_END__
}
if [ -f /lustre/runs/gym-job-20260101T000000Z-000000/a/steps/exporters/export-spec.json ]; then gym_exporters /lustre/runs/gym-job-20260101T000000Z-000000/a --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:a''/'; else printf '%s%s\n' '__GYM_EXPORT:a' __none__; fi
if [ -f /lustre/runs/gym-job-20260101T000000Z-000000/b/steps/exporters/export-spec.json ]; then gym_exporters /lustre/runs/gym-job-20260101T000000Z-000000/b --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:b''/'; else printf '%s%s\n' '__GYM_EXPORT:b' __none__; fi
