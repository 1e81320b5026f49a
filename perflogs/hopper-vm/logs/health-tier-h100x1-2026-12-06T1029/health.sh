#!/bin/bash
# The health tier on this GPU node: its whole command timed, start-up included, three times; what it printed comes back.
set -u
py=$(python3 -c "import sys; print(sys.executable)")
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 9
rm -rf /tmp/v && mkdir -p /tmp/v/bin
printf '#!/bin/sh\nPYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' "$py" > /tmp/v/bin/python
chmod +x /tmp/v/bin/python
export GPU_MEMPATHS_VENV=/tmp/v PYTHONUNBUFFERED=1
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv; python3 --version; nproc; uptime; } > "$OUT/node.txt" 2>&1
/tmp/v/bin/python -c 'import pynvml, yaml, jsonschema; print("pynvml", pynvml.__file__)' >> "$OUT/node.txt" 2>&1
for i in 1 2 3; do
    start=$(date +%s.%N)
    ./suite health --system hopper-vm --partition default > "$OUT/health-$i.txt" 2>&1; status=$?
    end=$(date +%s.%N)
    echo "exit $status; whole command $(python3 -c "print(f'{$end - $start:.2f}')") s wall" >> "$OUT/health-$i.txt"
done
# Past its limit: the tier stops and judges nothing.
./suite health --system hopper-vm --partition default --limit-s 0.2 > "$OUT/health-limit.txt" 2>&1; echo "exit $?" >> "$OUT/health-limit.txt"
