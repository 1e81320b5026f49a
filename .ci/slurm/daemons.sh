# Sourced by start.sh and stop.sh: the daemons' pid files in PIDDIR, their
# output in LOGDIR. Each daemon runs in the foreground of its own session, so
# its recorded pid is the daemon itself.

# running PID: true while PID exists and is not a zombie (the daemons are
# re-parented to whatever init the container has, which may not reap them)
running() {
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# pid_of NAME: print the pid recorded for NAME if a process of that name still
# runs under it (a pid file left by an earlier run may name a reused pid)
pid_of() {
    local pid
    pid=$(cat "$PIDDIR/$1.pid" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    # slurmd-ci2: the slurmd of node ci2 (a cluster of several nodes on this host)
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "${1%%-*}"* ]] || return 1
    running "$pid" || return 1
    echo "$pid"
}

# alive NAME: true if NAME's recorded process runs
alive() { pid_of "$1" >/dev/null; }

# launch NAME CMD...: run CMD in the foreground of its own session, in the
# background of the caller, and record its pid. Until the child has exec'd
# CMD its name is still bash's or setsid's, and `alive NAME` would call a
# daemon that is still starting dead (it did, on a loaded CI runner): wait
# for the exec, or for the child's end, which the caller reports with its log.
launch() {
    local name=$1 pid i; shift
    echo "start.sh: starting $name"
    setsid "$@" </dev/null >>"$LOGDIR/$name.out.log" 2>&1 &
    pid=$!
    echo "$pid" >"$PIDDIR/$name.pid"
    for ((i = 0; i < 200; i++)); do
        alive "$name" && return 0
        running "$pid" || return 0
        sleep 0.05
    done
    echo "start.sh: error: $name (pid $pid) had not exec'd after 10 s" >&2
    kill "$pid" 2>/dev/null || true   # stop.sh would not know it by its name
    return 1
}
