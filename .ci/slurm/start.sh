#!/usr/bin/env bash
# Start a one-node Slurm cluster (munged + slurmctld + slurmd) on this host,
# without systemd. Idempotent: daemons already running from an earlier call
# with the same run dir are left alone.
#
# Usage: start.sh [RUNDIR]        (default: /tmp/gpu-mempaths-slurm)
# Then:  source RUNDIR/env.sh     (sets SLURM_CONF for sbatch/srun/squeue/...)
#
# SLURM_CI_NODES=N (default 1): N nodes ci1..ciN, each its own slurmd on this
# host (slurmd -N; Debian's Slurm is built for several per host), ports 6831...
# SLURM_CI_PORT=P (default 6817): slurmctld's port, the slurmds' from P+14.
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
COUNT=${SLURM_CI_NODES:-1}
# Two clusters at once (two test modules) need their own ports: slurmctld's, then its slurmds' from +14.
PORT=${SLURM_CI_PORT:-6817}
[[ $PORT =~ ^[0-9]+$ ]] && (( PORT >= 1024 && PORT < 65000 )) || { echo "start.sh: error: SLURM_CI_PORT=$PORT" >&2; exit 1; }
[[ $COUNT =~ ^[1-9][0-9]?$ ]] || { echo "start.sh: error: SLURM_CI_NODES=$COUNT: give 1 to 99" >&2; exit 1; }
if (( COUNT == 1 )); then NAMES=("$NODE"); else NAMES=(); for ((k = 1; k <= COUNT; k++)); do NAMES+=("ci$k"); done; fi

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
    # Several nodes share the host's memory: each gets its share.
    realmem=$(( realmem / COUNT )); (( realmem >= 256 )) || realmem=256
    lines=
    for ((k = 0; k < COUNT; k++)); do
        lines+="NodeName=${NAMES[k]} NodeHostname=$NODE NodeAddr=127.0.0.1 Port=$((PORT + 14 + k)) CPUs=$cpus"
        lines+=" Sockets=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads RealMemory=$realmem State=UNKNOWN\n"
    done
    nodes=$(IFS=,; echo "${NAMES[*]}")
    sed -e "s|@NODELINES@|${lines%\\n}|" -e "s|@NODES@|$nodes|g" -e "s|@NODE@|$NODE|g" -e "s|@CTLPORT@|$PORT|g" \
        -e "s|@RUNDIR@|$RUNDIR|g" "$HERE/slurm.conf.in" >"$CONF.tmp"
    # SLURM_CI_HEALTH=PROGRAM: Slurm's HealthCheckProgram on every node, each SLURM_CI_HEALTH_INTERVAL s (5).
    if [[ -n ${SLURM_CI_HEALTH:-} ]]; then
        interval=${SLURM_CI_HEALTH_INTERVAL:-5}
        [[ $SLURM_CI_HEALTH == /* && -x $SLURM_CI_HEALTH ]] || die "SLURM_CI_HEALTH=$SLURM_CI_HEALTH: give an executable's absolute path"
        [[ $interval =~ ^[1-9][0-9]*$ ]] || die "SLURM_CI_HEALTH_INTERVAL=$interval: give whole seconds"
        printf 'HealthCheckProgram=%s\nHealthCheckInterval=%s\nHealthCheckNodeState=ANY\n' "$SLURM_CI_HEALTH" "$interval" >>"$CONF.tmp"
    fi
    mv -f "$CONF.tmp" "$CONF"
    echo "start.sh: node(s) $nodes on $NODE: CPUs=$cpus (${sockets}x${cores}x${threads}) RealMemory=${realmem}M each"
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
for name in "${NAMES[@]}"; do
    daemon=slurmd; (( COUNT == 1 )) || daemon=slurmd-$name
    mkdir -p "$RUNDIR/spool/$name"
    alive "$daemon" || launch "$daemon" slurmd -D -f "$CONF" -N "$name" || fail "$daemon did not start"
done

# ---- wait until the node is idle
deadline=$((SECONDS + TIMEOUT))
state=
while :; do
    for d in munged slurmctld; do
        alive "$d" || fail "$d exited during start-up"
    done
    # Every node idle (mix/alloc: already running jobs, a re-run).
    states=$(sinfo -h -N -o '%t' 2>/dev/null | sort -u | tr '\n' ' ' || true)
    ready=$(sinfo -h -N -t idle,mix,alloc -o '%N' 2>/dev/null | sort -u | wc -l || true)
    (( ready == COUNT )) && break
    (( SECONDS < deadline )) || fail "$ready of $COUNT node(s) idle after ${TIMEOUT}s (states: '${states:-no answer}')"
    sleep 0.5
done

echo "start.sh: Slurm cluster 'ci' up in ${SECONDS}s, $COUNT node(s) idle"
echo "start.sh: run 'source $RUNDIR/env.sh' to use it; stop with $HERE/stop.sh $RUNDIR"
echo "export SLURM_CONF=$CONF"
