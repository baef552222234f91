set -u
cd / || exit 1
gym_exporters() {
python3 - "$@" <<'__GYM_EXPORTERS_END__'
import sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # nothing from the current directory
import base64, importlib.abc, importlib.util, json
SOURCES = json.loads(base64.b64decode('<the staged exporter modules, JSON, base64>').decode("utf-8"))


class GymExporters(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name not in SOURCES:
            return None
        return importlib.util.spec_from_loader(name, self, origin="nemo_gym.orchestration.exporters:" + name)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(SOURCES[module.__name__], module.__spec__.origin, "exec"), module.__dict__)


sys.meta_path.insert(0, GymExporters())
import run_exports
sys.exit(run_exports.main(sys.argv[1:]))
__GYM_EXPORTERS_END__
}
if [ -f /mnt/gym-results/gym-job-20260101T000000Z-000000/first/steps/exporters/export-spec.json ]; then gym_exporters /mnt/gym-results/gym-job-20260101T000000Z-000000/first --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:first''/'; else printf '%s%s\n' '__GYM_EXPORT:first' __none__; fi
if [ -f /mnt/gym-results/gym-job-20260101T000000Z-000000/second/steps/exporters/export-spec.json ]; then gym_exporters /mnt/gym-results/gym-job-20260101T000000Z-000000/second --check-destinations 2>&1 | sed 's/^/''__GYM_EXPORT:second''/'; else printf '%s%s\n' '__GYM_EXPORT:second' __none__; fi
