#!/bin/bash
# One plain night of the nightly on this GPU node: its run.json (findings with codes), verdict.xml, drain.txt
# and the path matrix's job output (its matrices at the end) come back, with what it appended to the perflogs.
set -u
tar xzf .whl/perflogs.tgz || exit 9
py=$(python3 -c "import sys; print(sys.executable)")
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 9
rm -rf /tmp/v && mkdir -p /tmp/v/bin
printf '#!/bin/sh\nPYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' "$py" > /tmp/v/bin/python
chmod +x /tmp/v/bin/python
touch /tmp/v/.installed-requirements.txt /tmp/v/.installed-requirements-reports.txt
export GPU_MEMPATHS_VENV=/tmp/v PYTHONUNBUFFERED=1
{ nvidia-smi -L; python3 --version; nproc; uptime; } > "$OUT/node.txt" 2>&1
start=$(date +%s)
timeout -s TERM 500 ./suite nightly --system hopper-vm --confirm-later "${LATER_S:-30}" > "$OUT/output.txt" 2>&1; echo "nightly: exit $? after $(( $(date +%s) - start )) s" >> "$OUT/output.txt"
night=$(ls -td results/nightly/hopper-vm/2026-12-* | head -1)
mkdir -p "$OUT/night"
cp "$night"/run.json "$night"/verdict.xml "$night"/drain.txt "$night"/paths.csv "$OUT/night/" 2>/dev/null
find "$night" -path '*path_matrix*' -name 'rfm_job.out' | head -1 | xargs -r -I{} cp {} "$OUT/night/path_matrix-rfm_job.out"
./suite act "$night" --scheduler lsf --dry-run > "$OUT/act-dry-run.txt" 2>&1; echo "act: exit $?" >> "$OUT/act-dry-run.txt"
tail -30 "$OUT/output.txt"; tail -30 "$OUT/night/path_matrix-rfm_job.out"
