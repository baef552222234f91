#!/usr/bin/env bash
# Build the environment of the real vllm-router (PyPI `vllm-router`: a Rust router in a wheel, with
# a Python launcher) used by the prefill/decode tests. Cached: a second run with the same spec does
# nothing. Prints the line to export for the tests.
#
# usage: router-env.sh
#   env: GYM_ENVS_DIR (as in setup-envs; the venv goes to $GYM_ENVS_DIR/router),
#        ROUTER_PYTHON (interpreter, default: python3.11, else python3)
# Cost on the CPU test machine: about 10 s and 60 MB.
set -euo pipefail

readonly ROUTER_VERSION=0.1.17
envs=${GYM_ENVS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gym-orchestration/envs}
venv="$envs/router"
python=${ROUTER_PYTHON:-$(command -v python3.11 || command -v python3)}
spec="vllm-router==$ROUTER_VERSION python=$("$python" -c 'import sys; print(sys.version.split()[0])')"
marker="$venv/.router-env-done"

if [[ -f $marker && $(cat "$marker") == "$spec" ]]; then
    echo "router-env: cached ($spec)" >&2
else
    rm -rf "$venv"
    mkdir -p "$envs/logs"
    echo "router-env: building $venv ($spec)" >&2
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "vllm-router==$ROUTER_VERSION" \
        >"$envs/logs/router-env.log" 2>&1 || { tail -20 "$envs/logs/router-env.log" >&2; exit 1; }
    "$venv/bin/vllm-router" --help >/dev/null
    printf '%s\n' "$spec" >"$marker"
fi
echo "export GYM_ROUTER_BIN=$venv/bin"
