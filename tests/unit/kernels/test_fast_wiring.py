"""Whole models: the fast kernels wired into the integer kernels give the same bytes as the NumPy
reference path (REFINTERP_FAST_KERNELS=0) on every tensor, under every TFLite scheme."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
MODELS = ["refinterp/models/demo_int8.tflite", "tests/fixtures/tflite/ops_zoo_int8.tflite",
          "tests/fixtures/tflite/mobilenet_tiny_int16x8.tflite", "tests/fixtures/tflite/attention_block_int8.tflite"]
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


COVERAGE = [  # (model, scheme, {kernel module attribute: op}) — every listed fast path must be taken
    ("refinterp/models/demo_int8.tflite", "tflite-xnnpack",
     {"tflite.ref.conv:fast_conv": "Conv", "tflite.ref.conv:fast_depthwise": "DepthwiseConv", "tflite.ref.matmul:fast_fc": "FullyConnected"}),
    ("tests/fixtures/tflite/attention_block_int8.tflite", "tflite-xnnpack",
     {"tflite.ref.matmul:fast_fc": "FullyConnected", "tflite.ref.matmul:fast_bmm": "BatchMatMul"}),
    ("tests/fixtures/tflite/attention_block_int8.tflite", "tflite-reference",
     {"tflite.ref.matmul:fast_fc": "FullyConnected", "tflite.ref.matmul:fast_bmm": "BatchMatMul"}),
]


@pytest.mark.parametrize("model,scheme,paths", COVERAGE, ids=lambda c: Path(c).stem if isinstance(c, str) else None)
def test_fast_paths_are_taken(model, scheme, paths, monkeypatch):
    """Every node of the listed ops goes through its fast path (none falls back to NumPy)."""
    import importlib

    import refinterp
    from refinterp.cli.common import random_inputs

    taken: dict[str, list] = {}
    for attr in paths:
        mod_name, fn_name = attr.split(":")
        mod = importlib.import_module(f"refinterp.kernels.{mod_name}")
        if not getattr(mod, "_FAST"):
            pytest.fail("REFINTERP_FAST_KERNELS=0 in the test environment")
        orig = getattr(mod, fn_name)

        def counted(*a, _orig=orig, _attr=attr):
            y = _orig(*a)
            taken.setdefault(_attr, []).append(y is not None)
            return y
        monkeypatch.setattr(mod, fn_name, counted)
    g = refinterp.load(str(ROOT / model))
    refinterp.Session(g, scheme).run(random_inputs(g, 5))
    for attr, op in paths.items():
        n_nodes = sum(n.op == op for n in g.nodes)
        assert n_nodes > 0 and taken.get(attr) == [True] * n_nodes, (attr, taken.get(attr))
