#!/usr/bin/env bash
# Build the environment of the real export backends used by tests/exporters: $GYM_ENVS_DIR/mlflow, a
# Python 3.11 venv with the MLflow tracking server (`mlflow server`, and MLflow's own client to read
# back what was exported) and the Weights & Biases library (`wandb`, used offline: no account, no
# network). Cached: a second run with the same spec does nothing. Prints the line to export.
#
# usage: mlflow-env.sh
#   env: GYM_ENVS_DIR (as in setup-envs; the venv goes to $GYM_ENVS_DIR/mlflow),
#        MLFLOW_PYTHON (interpreter, default: python3.11, else python3)
# Cost on the CPU test machine: about 1 minute and 920 MB (mlflow brings pandas, SQLAlchemy, FastAPI, ...).
set -euo pipefail

# 3.17.2, not 3.18.0: the package index has no mlflow-skinny 3.18.0, which mlflow 3.18.0 requires.
readonly MLFLOW_VERSION=3.17.2
readonly WANDB_VERSION=0.31.0
envs=${GYM_ENVS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gym-orchestration/envs}
venv="$envs/mlflow"
python=${MLFLOW_PYTHON:-$(command -v python3.11 || command -v python3)}
spec="mlflow==$MLFLOW_VERSION wandb==$WANDB_VERSION python=$("$python" -c 'import sys; print(sys.version.split()[0])')"
marker="$venv/.mlflow-env-done"

if [[ -f $marker && $(cat "$marker") == "$spec" ]]; then
    echo "mlflow-env: cached ($spec)" >&2
else
    rm -rf "$venv"
    mkdir -p "$envs/logs"
    echo "mlflow-env: building $venv ($spec)" >&2
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "mlflow==$MLFLOW_VERSION" "wandb==$WANDB_VERSION" \
        >"$envs/logs/mlflow-env.log" 2>&1 || { tail -20 "$envs/logs/mlflow-env.log" >&2; exit 1; }
    "$venv/bin/python" -c 'import mlflow, wandb'
    "$venv/bin/mlflow" --version >/dev/null
    printf '%s\n' "$spec" >"$marker"
fi
echo "export GYM_MLFLOW_PYTHON=$venv/bin/python"
