#!/usr/bin/env bash
# Stop the single-node CI SLURM cluster started by .ci/slurm-up.sh.
# Idempotent: does nothing for daemons that are not running.
set -euo pipefail

stop_pidfile() {  # name pidfile
    local name="$1" pf="$2" pid
    [ -f "$pf" ] || { echo "[slurm-down] $name: not running (no pidfile)"; return 0; }
    pid="$(cat "$pf")"
    if kill -0 "$pid" 2>/dev/null; then
        echo "[slurm-down] stopping $name (pid $pid)"
        kill "$pid" || true
        for _ in $(seq 1 30); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "[slurm-down] $name still alive, sending SIGKILL"
            kill -9 "$pid" || true
        fi
    else
        echo "[slurm-down] $name: not running (stale pidfile)"
    fi
    rm -f "$pf"
}

# cancel any leftover jobs first (ignore errors if slurmctld is already gone)
if command -v scancel >/dev/null 2>&1 && scontrol ping 2>/dev/null | grep -q 'is UP'; then
    scancel --user="$(id -un)" 2>/dev/null || true
fi

stop_pidfile slurmd /run/slurm/slurmd.pid
stop_pidfile slurmctld /run/slurm/slurmctld.pid
stop_pidfile munged /run/munge/munged.pid
