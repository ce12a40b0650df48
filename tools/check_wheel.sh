#!/usr/bin/env bash
# Build the wheel, install it into a clean venv (no source tree on the path) and check that the
# installed package lists every scheme of schemes/, runs the demo diff and a short smoke test.
# Run by `make test` (and so by CI); usage: tools/check_wheel.sh [PYTHON]
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${1:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$REPO"
"$PY" -m pip wheel -q --no-deps --disable-pip-version-check . -w "$WORK/dist" 2>&1 | grep -v "^WARNING: Location" || true
rm -rf "$REPO/build" "$REPO"/*.egg-info
WHL="$(ls "$WORK"/dist/refinterp-*.whl)"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check "$WHL" 2>&1 | grep -v "^WARNING: Location" || true
cd "$WORK"  # nothing of the source tree importable from here
BIN="$WORK/venv/bin"
"$BIN/python" - "$REPO/schemes" <<'PY'
import pathlib, subprocess, sys
import refinterp
root = pathlib.Path(refinterp.__file__).resolve().parent
assert "site-packages" in str(root), f"refinterp imported from {root}, not the installed wheel"
want = sorted(p.stem for p in pathlib.Path(sys.argv[1]).glob("*.yaml") if not p.stem.startswith("_"))
out = subprocess.run([str(pathlib.Path(sys.executable).parent / "refinterp"), "schemes"],
                     capture_output=True, text=True, check=True).stdout
listed = sorted(line.split()[0] for line in out.splitlines() if line.strip() and not line.startswith(" "))
missing = [n for n in want if n not in listed]
assert not missing, f"installed wheel does not list schemes: {missing}\n{out}"
for n in want:
    refinterp.load_scheme(n)
from refinterp.quant import htp_curve16  # package data: the HTP's measured 16-bit curves
assert all(htp_curve16.curve(op).size == 65536 for op in htp_curve16.GRID)
print(f"wheel: {len(want)} schemes listed and loadable from {root}")
PY
MODELS="$("$BIN/python" -c 'import pathlib, refinterp; print(pathlib.Path(refinterp.__file__).parent / "models")')"
"$BIN/refinterp" run "$MODELS/demo_int8.tflite" --scheme tflite-reference --random-inputs 0 --outputs "$WORK/out.npz"
rc=0
"$BIN/refinterp" diff "$MODELS/demo_int8.tflite" --scheme tflite-reference --against "$MODELS/demo_device_dump.npz" \
    --explain --json "$WORK/report.json" > "$WORK/diff.txt" || rc=$?
if [ "$rc" -gt 1 ]; then cat "$WORK/diff.txt"; echo "wheel: demo diff failed (exit $rc)"; exit 1; fi
"$BIN/python" - "$WORK/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
best = r["explain"]["best_scheme"]
assert best == "tflite-xnnpack", f"demo diff from the wheel names best_scheme {best}"
print(f"wheel: demo diff ran, best_scheme {best}")
PY
"$BIN/refinterp" diff "$MODELS/demo_int8.tflite" --scheme tflite-xnnpack --against "$MODELS/demo_device_dump.npz" > /dev/null
echo "wheel: smoke test passed ($(basename "$WHL"))"
