#!/usr/bin/env bash
# Start a one-node Slurm cluster (munged + slurmctld + slurmd) on this host,
# without systemd. Idempotent: daemons already running from an earlier call
# with the same run dir are left alone.
#
# Usage: start.sh [RUNDIR]        (default: /tmp/gpu-mempaths-slurm)
# Then:  source RUNDIR/env.sh     (sets SLURM_CONF for sbatch/srun/squeue/...)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUNDIR=${1:-/tmp/gpu-mempaths-slurm}
case $RUNDIR in /*) ;; *) RUNDIR=$PWD/$RUNDIR ;; esac
TIMEOUT=${SLURM_CI_START_TIMEOUT:-60}

CONF=$RUNDIR/slurm.conf
PIDDIR=$RUNDIR/pids
LOGDIR=$RUNDIR/log
MUNGEDIR=$RUNDIR/munge
MUNGE_SOCKET=$MUNGEDIR/munge.socket.2
NODE=$(hostname -s)

die() { echo "start.sh: error: $*" >&2; exit 1; }

for tool in munged munge slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || die "'$tool' not found (apt-get install -y slurmctld slurmd slurm-client munge)"
done

. "$HERE/daemons.sh"

show_logs() {
    local f
    for f in "$LOGDIR"/*.out.log; do   # daemons in the foreground log to stderr
        [[ -e $f ]] || continue
        echo "----- tail -n 30 $f -----" >&2
        tail -n 30 "$f" >&2
    done
}

fail() { echo "start.sh: error: $*" >&2; show_logs; exit 1; }

mkdir -p "$RUNDIR" "$PIDDIR" "$LOGDIR" "$RUNDIR/state" "$RUNDIR/spool" "$MUNGEDIR"
chmod 0755 "$RUNDIR" "$MUNGEDIR"

# ---- render slurm.conf (only when no Slurm daemon is using the current one)
if ! alive slurmctld && ! alive slurmd || [[ ! -s $CONF ]]; then
    cpus=$(nproc); sockets=1; cores=$cpus; threads=1
    if hw=$(slurmd -C 2>/dev/null | head -n1) && [[ $hw == NodeName=* ]]; then
        for kv in $hw; do
            case $kv in
                CPUs=*) cpus=${kv#*=} ;;
                SocketsPerBoard=*) sockets=${kv#*=} ;;
                CoresPerSocket=*) cores=${kv#*=} ;;
                ThreadsPerCore=*) threads=${kv#*=} ;;
            esac
        done
    fi
    # Half of the currently available memory, in MiB (memory is not a
    # consumable resource with CR_Core; this only has to be <= the real size).
    avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
    realmem=$(( avail_kib / 1024 / 2 ))
    (( realmem >= 256 )) || realmem=256
    sed -e "s|@NODE@|$NODE|g" -e "s|@CPUS@|$cpus|g" -e "s|@SOCKETS@|$sockets|g" \
        -e "s|@CORES@|$cores|g" -e "s|@THREADS@|$threads|g" \
        -e "s|@REALMEM@|$realmem|g" -e "s|@RUNDIR@|$RUNDIR|g" \
        "$HERE/slurm.conf.in" >"$CONF.tmp"
    mv -f "$CONF.tmp" "$CONF"
    echo "start.sh: node $NODE: CPUs=$cpus (${sockets}x${cores}x${threads}) RealMemory=${realmem}M"
fi

printf 'export SLURM_CONF=%q\n' "$CONF" >"$RUNDIR/env.sh"
export SLURM_CONF=$CONF     # for this script's own client calls only

# ---- munged: private instance, key and socket in the run dir
if ! alive munged; then
    if [[ ! -s $MUNGEDIR/munge.key ]]; then
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile="$MUNGEDIR/munge.key"
        else
            dd if=/dev/urandom of="$MUNGEDIR/munge.key" bs=1024 count=1 status=none
        fi
    fi
    chmod 0600 "$MUNGEDIR/munge.key"
    rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
    launch munged munged --foreground --force \
        --socket="$MUNGE_SOCKET" --key-file="$MUNGEDIR/munge.key" \
        --pid-file="$MUNGEDIR/munged.pid" --seed-file="$MUNGEDIR/munged.seed" \
        --log-file="$LOGDIR/munged.log" || fail "munged did not start"
fi
for ((i = 0; i < 50; i++)); do
    munge --socket="$MUNGE_SOCKET" -n </dev/null 2>/dev/null \
        | unmunge --socket="$MUNGE_SOCKET" >/dev/null 2>&1 && break
    alive munged || fail "munged exited"
    sleep 0.2
done
(( i < 50 )) || fail "munged does not answer on $MUNGE_SOCKET"

# ---- slurmctld and slurmd, in the foreground (-D) of their own sessions
alive slurmctld || launch slurmctld slurmctld -D -f "$CONF" || fail "slurmctld did not start"
alive slurmd || launch slurmd slurmd -D -f "$CONF" -N "$NODE" || fail "slurmd did not start"

# ---- wait until the node is idle
deadline=$((SECONDS + TIMEOUT))
state=
while :; do
    for d in munged slurmctld slurmd; do
        alive "$d" || fail "$d exited during start-up"
    done
    state=$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null | head -n1 || true)
    case $state in
        idle|mix|alloc) break ;;   # mix/alloc: already running jobs (re-run)
    esac
    (( SECONDS < deadline )) || fail "node $NODE not idle after ${TIMEOUT}s (state: '${state:-no answer}')"
    sleep 0.5
done

echo "start.sh: Slurm cluster 'ci' up in ${SECONDS}s, node $NODE is $state"
echo "start.sh: run 'source $RUNDIR/env.sh' to use it; stop with $HERE/stop.sh $RUNDIR"
echo "export SLURM_CONF=$CONF"
