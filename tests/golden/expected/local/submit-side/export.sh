set -u
cd / || exit 1
gym_exporters() {
python3 - "$@" <<'__GYM_EXPORTERS_END__'
<shipping.inline(Program.EXPORTERS)>
__GYM_EXPORTERS_END__
}
if [ -f /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first/steps/exporters/export-spec.json ]; then gym_exporters /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/first --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:first''/'; else printf '%s%s\n' '__GYM_EXPORT:first' __none__; fi
if [ -f /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second/steps/exporters/export-spec.json ]; then gym_exporters /tmp/gym-golden-runs/gym-job-20260101T000000Z-000000/second --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:second''/'; else printf '%s%s\n' '__GYM_EXPORT:second' __none__; fi
