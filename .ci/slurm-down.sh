#!/usr/bin/env bash
# Stop the private test cluster of .ci/slurm-up.sh and undo what it changed:
# cancel its jobs, stop slurmd, slurmctld and munged (by their pidfiles in
# $SLURM_DIR), purge the packages it installed, remove the /etc/hosts line it
# added, and remove $SLURM_DIR. Safe to run more than once, or after a
# slurm-up.sh that failed half-way.
#
# Env: SLURM_DIR (default /tmp/lmstudy-slurm); SLURM_KEEP_PACKAGES=1 keeps
# the packages it installed (to run the test again without a new install).
set -uo pipefail

DIR="${SLURM_DIR:-/tmp/lmstudy-slurm}"
if [ ! -d "$DIR" ]; then
    echo "[slurm-down] $DIR does not exist: nothing to do"
    exit 0
fi
export SLURM_CONF="$DIR/slurm.conf"

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

# cancel this cluster's jobs first (nothing if slurmctld is already gone)
if [ -f "$SLURM_CONF" ] && command -v scancel >/dev/null 2>&1 \
        && timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; then
    scancel --user="$(id -un)" 2>/dev/null || true
fi

stop_pidfile slurmd "$DIR/slurmd.pid"
stop_pidfile slurmctld "$DIR/slurmctld.pid"
stop_pidfile munged "$DIR/munge/munged.pid"

if [ -s "$DIR/installed-packages" ] && [ "${SLURM_KEEP_PACKAGES:-0}" != 1 ]; then
    echo "[slurm-down] purging the packages slurm-up.sh installed: $(tr '\n' ' ' < "$DIR/installed-packages")"
    # shellcheck disable=SC2046
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $(cat "$DIR/installed-packages") >/dev/null \
        || echo "[slurm-down] apt-get purge failed; packages left: $(cat "$DIR/installed-packages")" >&2
fi

if [ -s "$DIR/hosts-line" ]; then
    line="$(cat "$DIR/hosts-line")"
    echo "[slurm-down] removing '$line' from /etc/hosts"
    tmp="$(mktemp)"
    grep -vxF "$line" /etc/hosts > "$tmp" || true
    cat "$tmp" > /etc/hosts  # in place: /etc/hosts may be a bind mount
    rm -f "$tmp"
fi

rm -rf "$DIR"
echo "[slurm-down] done"
