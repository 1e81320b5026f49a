#!/usr/bin/env bash
# Stop the daemons that start.sh started (found through RUNDIR/pids/*.pid).
# Jobs still queued or running on the cluster are cancelled first.
# Daemons that are already gone are fine. Logs and state stay in RUNDIR.
#
# Usage: stop.sh [RUNDIR]        (default: /tmp/gpu-mempaths-slurm)
set -euo pipefail

RUNDIR=${1:-/tmp/gpu-mempaths-slurm}
case $RUNDIR in /*) ;; *) RUNDIR=$PWD/$RUNDIR ;; esac
PIDDIR=$RUNDIR/pids
export SLURM_CONF=$RUNDIR/slurm.conf

. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/daemons.sh"

# Cancel leftover jobs so that no slurmstepd outlives slurmd.
if pid_of slurmctld >/dev/null; then
    jobs=$(timeout 10 squeue -h -o '%i' 2>/dev/null || true)
    if [[ -n $jobs ]]; then
        echo "stop.sh: cancelling jobs: ${jobs//$'\n'/ }"
        # shellcheck disable=SC2086
        timeout 10 scancel $jobs || true
        for ((i = 0; i < 30; i++)); do
            [[ -z $(timeout 10 squeue -h -t PD,R,CG,S -o '%i' 2>/dev/null || true) ]] && break
            sleep 0.5
        done
    fi
fi

slurmds=$(cd "$PIDDIR" 2>/dev/null && ls slurmd*.pid 2>/dev/null | sed 's/\.pid$//' || true)
for name in $slurmds slurmctld munged; do
    if ! pid=$(pid_of "$name"); then
        rm -f "$PIDDIR/$name.pid"
        continue
    fi
    echo "stop.sh: stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do        # up to 20 s
        running "$pid" || break
        sleep 0.2
    done
    if running "$pid"; then
        echo "stop.sh: $name (pid $pid) ignored SIGTERM, sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 25; i++)); do
            running "$pid" || break
            sleep 0.2
        done
    fi
    rm -f "$PIDDIR/$name.pid"
done
echo "stop.sh: stopped (logs in $RUNDIR/log)"
