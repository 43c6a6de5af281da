#!/usr/bin/env bash
# Runs the three built-in tracks' default studies exactly as a user would
# and prints, per track: wall time, every per-seed list and every MDE / verdict / chance field found in
# bench_report.json (walked generically, so it keeps working as the report's layout changes).
# Run on an idle machine from the repository root with the venv active:
#   bash benchmarks/calibrate_tracks.sh [OUT_ROOT [BUDGET]]   (defaults: runs/calibrate, default)
# BUDGET=smoke only checks that the script itself works.
# The calibration targets, at the default budget: wall time <= 600 s per study, MDE <= 5 % of the matched
# baseline's mean, the no-mixing control worse than the baseline by more than the MDE, no seed at chance.
set -euo pipefail
root="${1:-runs/calibrate}"
budget="${2:-default}"
mkdir -p "$root"
for spec in "image --grid 32x32" "video" "sequence"; do
    name="${spec%% *}"
    out="$root/$name"
    rm -rf "$out"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    gridmix run --track $spec --budget "$budget" --out "$out" > "$out.log" 2>&1 || echo "gridmix run exited $? (see $out.log)"
    end=$(date +%s.%N)
    echo "== $name: wall $(python3 -c "print(f'{$end - $start:.0f}')") s (log: $out.log)"
    python3 - "$out/bench_report.json" <<'PY'
import json, sys
from pathlib import Path

path = Path(sys.argv[1])
if not path.exists():
    sys.exit(f"   no report at {path}")
KEYS = ("verdict", "mde", "mde_rel_pct", "p_value", "delta_mean", "mean", "chance", "role", "per_seed")

def walk(node, trail):
    if isinstance(node, dict):
        for key, value in node.items():
            numbers = not isinstance(value, list) or all(isinstance(v, (int, float)) or v is None for v in value)
            if key in KEYS and not isinstance(value, dict) and numbers:
                shown = [round(v, 4) if isinstance(v, float) else v for v in value] if isinstance(value, list) \
                    else (round(value, 4) if isinstance(value, float) else value)
                print(f"   {'.'.join(trail + [key])}: {shown}")
            elif key not in ("sweep", "mechanism_signature"):
                walk(value, trail + [key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            walk(value, trail + [str(i)])

walk(json.loads(path.read_text()), [])
PY
done
