#!/usr/bin/env bash
# Build the Python environments of the real Ray used in tests: $GYM_ENVS_DIR/ray-serve, a Python 3.11
# venv with ray[default,serve] (Ray Serve: fastapi, starlette, uvicorn; aiohttp) that runs the Ray
# Serve gateway (tests/gateway; its own directory, so a checkout whose script still builds the older
# $GYM_ENVS_DIR/ray without Serve never removes it from under a running test); and
# $GYM_ENVS_DIR/ray-minimal, plain `ray` without the dashboard, as a vLLM image carries it.
# Cached: a second run with the same spec does nothing. Prints the lines to export for the tests.
#
# usage: ray-env.sh
#   env: GYM_ENVS_DIR (as in setup-envs; the venv goes to $GYM_ENVS_DIR/ray-serve),
#        RAY_PYTHON (interpreter, default /root/.pyenv/versions/3.11.7/bin/python3.11)
# Cost on the CPU test machine: about 60 s and 450 MB.
set -euo pipefail

readonly RAY_VERSION=2.60.0
envs=${GYM_ENVS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gym-orchestration/envs}
venv="$envs/ray-serve"
python=${RAY_PYTHON:-/root/.pyenv/versions/3.11.7/bin/python3.11}
spec="ray[default,serve]==$RAY_VERSION aiohttp python=$("$python" -c 'import sys; print(sys.version.split()[0])')"
marker="$venv/.ray-env-done"

if [[ -f $marker && $(cat "$marker") == "$spec" ]]; then
    echo "ray-env: cached ($spec)" >&2
else
    rm -rf "$venv"
    mkdir -p "$envs/logs"
    echo "ray-env: building $venv ($spec)" >&2
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "ray[default,serve]==$RAY_VERSION" aiohttp \
        >"$envs/logs/ray-env.log" 2>&1 || { tail -20 "$envs/logs/ray-env.log" >&2; exit 1; }
    "$venv/bin/python" -c 'import ray, ray.serve, aiohttp'
    printf '%s\n' "$spec" >"$marker"
fi
echo "export GYM_RAY_PYTHON=$venv/bin/python"

minimal="$envs/ray-minimal"
minimal_spec="ray==$RAY_VERSION python=$("$python" -c 'import sys; print(sys.version.split()[0])')"
if [[ -f $minimal/.ray-env-done && $(cat "$minimal/.ray-env-done") == "$minimal_spec" ]]; then
    echo "ray-env: cached ($minimal_spec)" >&2
else
    rm -rf "$minimal"
    echo "ray-env: building $minimal ($minimal_spec)" >&2
    "$python" -m venv "$minimal"
    "$minimal/bin/pip" install --quiet --disable-pip-version-check "ray==$RAY_VERSION" \
        >"$envs/logs/ray-minimal-env.log" 2>&1 || { tail -20 "$envs/logs/ray-minimal-env.log" >&2; exit 1; }
    "$minimal/bin/python" -c 'import ray'
    printf '%s\n' "$minimal_spec" >"$minimal/.ray-env-done"
fi
echo "export GYM_RAY_MINIMAL_BIN=$minimal/bin"
