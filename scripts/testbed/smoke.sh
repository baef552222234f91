#!/usr/bin/env bash
# smoke.sh: end-to-end check of the test bed. Brings up scripts/local-slurm and
# scripts/local-sshd (a no-op when they are up), runs a few real jobs, prints one PASS/FAIL line
# per check and exits non-zero if any failed. Both stay up afterwards, for inspection; stop them
# with `scripts/local-slurm down; scripts/local-sshd down`.
set -euo pipefail

SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$SCRIPTS/local-slurm" up
"$SCRIPTS/local-sshd" up
eval "$("$SCRIPTS/local-slurm" env)"
eval "$("$SCRIPTS/local-sshd" env)"

# Jobs write here; all nodes share the filesystem, so the batch output is readable right away.
WORK=$(mktemp -d /tmp/gym-testbed-smoke.XXXXXX)
pass=0
fail=0

check() {  # check NAME CMD...: run CMD, record PASS/FAIL
  if "${@:2}"; then
    echo "PASS $1"; pass=$((pass + 1))
  else
    echo "FAIL $1"; fail=$((fail + 1))
  fi
}

wait_job() {  # wait_job ID: until the job has left the queue (at most 60 s)
  local tries=600
  while [ -n "$(squeue -h -j "$1" 2>/dev/null)" ] && ((tries-- > 0)); do sleep 0.1; done
}

# job_field ID NAME: a field of `scontrol show job` (works for MinJobAge=600 s after the end;
# there is no sacct without accounting).
job_field() {
  scontrol show job "$1" | grep -oE "(^|[[:space:]])$2=[^[:space:]]+" | head -n 1 | cut -d= -f2-
}

completed_ok() {  # completed_ok ID
  [ "$(job_field "$1" JobState)" = COMPLETED ] && [ "$(job_field "$1" ExitCode)" = 0:0 ]
}

equals() { [ "$1" = "$2" ]; }

count_matches() {  # count_matches N REGEX FILE: exactly N lines of FILE match REGEX
  [ "$(grep -cE "$2" "$3")" = "$1" ]
}

count_distinct() {  # count_distinct N REGEX FILE: N different strings in FILE match REGEX
  [ "$(grep -oE "$2" "$3" | sort -u | wc -l)" = "$1" ]
}

rsync_roundtrip() {  # rsync_roundtrip DIR: copy DIR/payload.txt through the ssh "login node"
  echo "rsync payload" >"$1/payload.txt"
  rsync -a -e "ssh -F $GYM_TEST_SSH_CONFIG" "$1/payload.txt" "$GYM_TEST_SSH_HOST:$1/copy.txt" &&
    cmp -s "$1/payload.txt" "$1/copy.txt"
}

# --- 1. root namespace: the cluster answers, with both partitions
check "sinfo lists partitions debug (default) and gpu" \
  equals "debug* gpu " "$(sinfo -h -o %P | sort | tr '\n' ' ')"

# --- 2. a 2-node job: pyxis-style container steps on both nodes, and a server on the second
# node reached by hostname from the first (each node has its own hostname, IP and ports)
cat >"$WORK/two-node.sbatch" <<'EOF'
#!/bin/bash
#SBATCH --job-name=smoke-two-node
#SBATCH --nodes=2 --ntasks-per-node=1 --partition=gpu --gpus-per-node=4
set -u
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
srun --overlap --nodes=2 --ntasks-per-node=1 \
  --container-image=x --container-mounts=/tmp:/tmp --container-workdir=/tmp \
  bash -c 'echo "STEP host=$(hostname) pwd=$PWD image=${PYXIS_CONTAINER_IMAGE:-} mounts=${PYXIS_CONTAINER_MOUNTS:-} gpus=${CUDA_VISIBLE_DEVICES:-}"'
port=18080
# --ntasks=1: the job-level --ntasks-per-node=1 x 2 nodes would otherwise ask 2 tasks of 1 node
srun --overlap --nodes=1 --ntasks=1 --nodelist="${nodes[1]}" \
  python3 -m http.server "$port" --bind 0.0.0.0 >server.log 2>&1 &
code=000
for _ in $(seq 100); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://${nodes[1]}:$port/") && [ "$code" = 200 ] && break
  sleep 0.1
done
echo "HTTP from=$(hostname) to=${nodes[1]} code=$code"
# the background server step is cancelled by Slurm when this script ends
EOF
J=$(sbatch --parsable --chdir="$WORK" --output="$WORK/%x-%j.out" "$WORK/two-node.sbatch")
wait_job "$J"
OUT=$WORK/smoke-two-node-$J.out
check "2-node job $J COMPLETED 0:0" completed_ok "$J"
check "two container steps" count_matches 2 '^STEP ' "$OUT"
check "the steps ran on 2 different nodes (hostnames n1..n3)" \
  count_distinct 2 '^STEP host=n[1-3] ' "$OUT"
check "PYXIS_CONTAINER_IMAGE/MOUNTS set, --container-workdir applied" \
  count_matches 2 ' pwd=/tmp image=x mounts=/tmp:/tmp ' "$OUT"
check "4 fake GPUs per node in the steps" count_matches 2 ' gpus=0,1,2,3$' "$OUT"
check "server on node 2 (0.0.0.0) reached by hostname from node 1" \
  grep -qE '^HTTP from=n[1-3] to=n[1-3] code=200$' "$OUT"

# --- 3. scancel from the root namespace
J=$(sbatch --parsable --output=/dev/null --wrap 'sleep 300')
for _ in $(seq 100); do [ "$(squeue -h -j "$J" -o %T)" = RUNNING ] && break; sleep 0.1; done
scancel "$J"
wait_job "$J"
check "scancel: job $J CANCELLED" equals CANCELLED "$(job_field "$J" JobState)"

# --- 4. over ssh, as a tool would drive a login node: the session has SLURM_CONF from sshd
SSH=(ssh -F "$GYM_TEST_SSH_CONFIG" "$GYM_TEST_SSH_HOST")
check "ssh login as root" equals 0 "$("${SSH[@]}" id -u || true)"
J=$("${SSH[@]}" "sbatch --parsable --nodes=2 --output=$WORK/ssh-%j.out --wrap 'srun hostname'" || true)
if [[ $J =~ ^[0-9]+$ ]]; then
  wait_job "$J"
  check "sbatch over ssh: job $J COMPLETED 0:0" completed_ok "$J"
  check "srun in the ssh-submitted job ran on 2 nodes" \
    count_distinct 2 '^n[1-3]$' "$WORK/ssh-$J.out"
else
  check "sbatch over ssh returned a job id (got: '$J')" false
fi
check "rsync over ssh" rsync_roundtrip "$WORK"

if [ "$fail" -ne 0 ]; then
  echo "--- job outputs in $WORK:" >&2
  tail -n 20 "$WORK"/*.out >&2 || true
else
  rm -rf "$WORK"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
