#!/bin/bash
# A night of the epilog tier's cases on this GPU node (its build kept), then the epilog tier's whole command
# timed twice; at most 8 files come back.
set -u
tar xzf .whl/perflogs.tgz || exit 9
py=$(python3 -c "import sys; print(sys.executable)")
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 9
rm -rf /tmp/v && mkdir -p /tmp/v/bin
printf '#!/bin/sh\nPYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' "$py" > /tmp/v/bin/python
chmod +x /tmp/v/bin/python
touch /tmp/v/.installed-requirements.txt /tmp/v/.installed-requirements-reports.txt
export GPU_MEMPATHS_VENV=/tmp/v PYTHONUNBUFFERED=1
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv; nproc; uptime; } > "$OUT/node.txt" 2>&1
start=$(date +%s)
timeout -s TERM 240 ./suite nightly --system hopper-vm --confirm-later 0 --no-report -- -n "path_matrix|host_bandwidth|copy_latency|um_bandwidth%memory=device|p2p_pingpong%variant=baseline" > "$OUT/night-output.txt" 2>&1
echo "nightly: exit $? after $(( $(date +%s) - start )) s" >> "$OUT/night-output.txt"
night=$(ls -td results/nightly/hopper-vm/2026-12-* | head -1)
tar czf "$OUT/night.tgz" --exclude=stage --exclude=output "$night"
timed() {
    local name=$1; shift
    local s e st
    s=$(date +%s.%N); "$@" > "$OUT/$name.txt" 2>&1; st=$?; e=$(date +%s.%N)
    echo "exit $st; whole command $(python3 -c "print(f'{$e - $s:.2f}')") s wall" >> "$OUT/$name.txt"
}
for i in 1 2; do timed "epilog-$i" ./suite health --tier epilog --system hopper-vm --partition default; done
tar czf "$OUT/health.tgz" --exclude=stage --exclude=output results/health
tail -n 3 "$OUT"/*.txt
