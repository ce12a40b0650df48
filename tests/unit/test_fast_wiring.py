"""Whole models: the fast kernels wired into the integer kernels give the same bytes as the NumPy
reference path (REFINTERP_FAST_KERNELS=0) on every tensor, under every TFLite scheme."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = ["refinterp/models/demo_int8.tflite", "tests/fixtures/tflite/ops_zoo_int8.tflite",
          "tests/fixtures/tflite/mobilenet_tiny_int16x8.tflite"]
SCHEMES = ["tflite-reference", "tflite-optimized", "tflite-xnnpack", "tflite-micro"]

_CHILD = r'''
import sys, numpy as np, refinterp
from refinterp.cli.common import random_inputs
model, out = sys.argv[1], sys.argv[2]
g = refinterp.load(model)
arrays = {}
for sch in sys.argv[3:]:
    for name, v in refinterp.Session(g, sch).run(random_inputs(g, 3), capture="all").items():
        arrays[f"{sch}|{name}"] = v
np.savez(out, **arrays)
'''


@pytest.mark.parametrize("model", MODELS, ids=[Path(m).stem for m in MODELS])
def test_fast_path_is_bit_identical(model, tmp_path):
    outs = {}
    for flag in ("1", "0"):
        out = tmp_path / f"fast{flag}.npz"
        env = dict(os.environ, REFINTERP_FAST_KERNELS=flag)
        subprocess.run([sys.executable, "-c", _CHILD, str(ROOT / model), str(out), *SCHEMES], env=env,
                       check=True, cwd=ROOT, timeout=300)
        with np.load(out, allow_pickle=False) as z:
            outs[flag] = {k: z[k] for k in z.files}
    assert outs["1"].keys() == outs["0"].keys() and len(outs["1"]) > 20
    differing = [k for k in outs["1"] if not np.array_equal(outs["1"][k], outs["0"][k])]
    assert differing == []
