#!/bin/bash
# A night on this GPU node (its build kept), then the health tier's whole command timed three times, its facts
# alone once, once beside a neighbour copying through GPU 0's host link, and the epilog tier once; what they
# wrote comes back.
set -u
tar xzf .whl/perflogs.tgz || exit 9
py=$(python3 -c "import sys; print(sys.executable)")
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 9
rm -rf /tmp/v && mkdir -p /tmp/v/bin
printf '#!/bin/sh\nPYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' "$py" > /tmp/v/bin/python
chmod +x /tmp/v/bin/python
touch /tmp/v/.installed-requirements.txt /tmp/v/.installed-requirements-reports.txt
export GPU_MEMPATHS_VENV=/tmp/v PYTHONUNBUFFERED=1
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv; python3 --version; nproc; uptime; } > "$OUT/node.txt" 2>&1
find perflogs/hopper-vm -type f -printf '%s %p\n' > /tmp/sizes
rm -rf /tmp/orig && mkdir -p /tmp/orig && cp -a perflogs /tmp/orig/
start=$(date +%s)
# The night of the short tiers' cases alone (device time is short): its build kept, each case's seconds.
timeout -s TERM 180 ./suite nightly --system hopper-vm --confirm-later 0 --no-report -- -n "${NIGHT_CASES:-path_matrix|host_bandwidth|copy_latency|um_bandwidth%memory=device|p2p_pingpong%variant=baseline}" > "$OUT/night-output.txt" 2>&1
echo "nightly: exit $? after $(( $(date +%s) - start )) s" >> "$OUT/night-output.txt"
night=$(ls -td results/nightly/hopper-vm/2026-12-* | head -1)
# The night's folder but its stage and output, and what it appended to the perflogs (as .whl/night.sh).
tar czf "$OUT/night.tgz" --exclude=stage --exclude=output "$night"
new=$(mktemp -d)
while read -r size path; do
    mkdir -p "$new/$(dirname "$path")"
    if [ ! -f "$path" ]; then echo "$path" >> "$new/gone.txt"; continue; fi
    now=$(stat -c %s "$path")
    if [ "$now" -gt "$size" ] && cmp -s -n "$size" "$path" "/tmp/orig/$path"; then
        tail -c +$((size + 1)) "$path" > "$new/$path.appended"
    elif ! cmp -s "$path" "/tmp/orig/$path"; then cp "$path" "$new/$path.whole"; fi
done < /tmp/sizes
find perflogs/hopper-vm -type f | while read -r path; do
    grep -q " $path\$" /tmp/sizes && continue
    mkdir -p "$new/$(dirname "$path")"; cp "$path" "$new/$path.new"
done
tar czf "$OUT/perflogs-appended.tgz" -C "$new" . && find "$new" -type f | wc -l > "$OUT/perflogs-appended.count"
timed() {
    local name=$1; shift
    local s e st
    s=$(date +%s.%N); "$@" > "$OUT/$name.txt" 2>&1; st=$?; e=$(date +%s.%N)
    echo "exit $st; whole command $(python3 -c "print(f'{$e - $s:.2f}')") s wall" >> "$OUT/$name.txt"
}
for i in 1 2; do timed "health-$i" ./suite health --system hopper-vm --partition default; done
timed health-facts-only ./suite health --system hopper-vm --partition default --facts-only
# The planted fault: a neighbour copying 1 GiB buffers through GPU 0's host link by copy engine, both ways.
bin=$(ls -d "$night"/stage/hopper-vm/default/gnu/SuiteBuild_*/bin | head -1)
( while :; do "$bin/path_matrix" --paths host --engines ce --size 1G --samples 20 --numa-nodes 0 > /dev/null 2>&1; done ) &
neighbour=$!
sleep 3
timed health-neighbour ./suite health --system hopper-vm --partition default
kill "$neighbour"; pkill -f "path_matrix --paths host --engines ce --size 1G"; wait
sleep 2
timed health-after ./suite health --system hopper-vm --partition default
[ -n "${EPILOG:-}" ] && timed epilog ./suite health --tier epilog --system hopper-vm --partition default
# One file each: a tree under $OUT deeper than the machine sends back is lost.
tar czf "$OUT/health.tgz" --exclude=stage --exclude=output results/health
tail -n 4 "$OUT"/*.txt
