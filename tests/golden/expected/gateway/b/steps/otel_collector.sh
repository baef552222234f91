#!/bin/bash
# The OpenTelemetry collector of this job, beside the driver. It is stopped by a request file,
# not a signal to srun (which would kill it before it flushes): TERM goes to the collector itself.
set -uo pipefail
# shellcheck source=/dev/null
source "$GYM_JOB_DIR/steps/lib.sh"
gym_step_begin otel_collector 0 1
stop="$(gym_state_dir)/stop-collector"
otelcol-contrib --config /lustre/runs/gym-job-20260101T000000Z-000000/b/otel/collector.yaml &
collector=$!
trap 'kill -TERM "$collector" 2>/dev/null' TERM INT
while kill -0 "$collector" 2>/dev/null; do
    if [ -e "$stop" ]; then
        gym_log "stopping the collector so that it flushes"
        kill -TERM "$collector"
        break
    fi
    sleep 0.5
done
wait "$collector"
