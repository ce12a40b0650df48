"""TFLite resource variables (streaming state) vs LiteRT over consecutive runs, every tensor, every run.

Fixtures: tests/fixtures/tflite/streaming_state_{float32,int8}.tflite (tools/make_state_fixtures.py):
VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE with a CALL_ONCE initialisation subgraph.  LiteRT runs in
a child process (its reference resolver can abort); the state carries from run to run in both, and
``Session.reset_state()`` starts over.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"
RUNS = 6
CHILD = r"""
import json, sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
path, resolver, runs, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
kind = {"ref": OpResolverType.BUILTIN_REF, "opt": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        "xnnpack": OpResolverType.BUILTIN}[resolver]
it = Interpreter(model_path=path, experimental_preserve_all_tensors=True, experimental_op_resolver_type=kind)
it.allocate_tensors()
inp = it.get_input_details()[0]
arrays = {}
for k in range(runs):
    x = np.random.default_rng(k).uniform(-1, 1, inp["shape"]).astype(inp["dtype"])
    it.set_tensor(inp["index"], x)
    it.invoke()
    for d in it.get_tensor_details():
        if d["dtype"] in (np.float32, np.int8, np.int32, np.uint8, np.int16):
            try:
                arrays[f"{k}|{d['name']}"] = np.array(it.get_tensor(d["index"]))
            except ValueError:
                pass
np.savez(out, **arrays)
"""


def _litert(path: Path, resolver: str, tmp_path: Path) -> dict[int, dict[str, np.ndarray]]:
    out = tmp_path / f"{resolver}.npz"
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), resolver, str(RUNS), str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"LiteRT ({resolver}) failed or aborted: {r.stderr[-500:]}"
    runs: dict[int, dict[str, np.ndarray]] = {}
    with np.load(out, allow_pickle=False) as z:
        for key in z.files:
            k, name = key.split("|", 1)
            runs.setdefault(int(k), {})[name] = z[key]
    return runs


CASES = [("streaming_state_float32.tflite", "float32", "opt"),
         ("streaming_state_float32.tflite", "tflite-reference", "ref"),
         ("streaming_state_float32.tflite", "tflite-xnnpack", "xnnpack"),
         ("streaming_state_int8.tflite", "tflite-reference", "ref"),
         ("streaming_state_int8.tflite", "tflite-optimized", "opt"),
         ("streaming_state_int8.tflite", "tflite-xnnpack", "xnnpack")]


@pytest.mark.parametrize("fixture,scheme,resolver", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_state_carries_over_runs(fixture, scheme, resolver, tmp_path):
    path = FIX / fixture
    want = _litert(path, resolver, tmp_path)
    g = refinterp.load(str(path))
    s = refinterp.Session(g, scheme)
    compared = 0
    for k in range(RUNS):
        x = np.random.default_rng(k).uniform(-1, 1, g.tensors[g.inputs[0]].shape).astype(np.float32)
        got = s.run({g.inputs[0]: x}, capture="all")
        for name, w in want[k].items():
            if name not in got or got[name].shape != w.shape:
                continue
            v = got[name]
            if w.dtype.kind == "f":  # float kernels: float tolerance (integer tensors: exact)
                np.testing.assert_allclose(v, w, rtol=1e-5, atol=1e-6, err_msg=f"run {k} {name}")
            else:
                assert np.array_equal(v, w), f"run {k} tensor {name}: {np.sum(v != w)}/{w.size} differ"
            compared += 1
    assert compared >= RUNS * 6
    assert list(s.variables) == ["/state"]


def test_reset_state_starts_over():
    g = refinterp.load(str(FIX / "streaming_state_int8.tflite"))
    s = refinterp.Session(g, "tflite-reference")
    xs = [np.random.default_rng(k).uniform(-1, 1, (1, 16)).astype(np.float32) for k in range(3)]
    first = [s.run({g.inputs[0]: x})[g.outputs[0]] for x in xs]
    assert not np.array_equal(first[0], s.run({g.inputs[0]: xs[0]})[g.outputs[0]])  # state moved on
    s.reset_state()
    again = [s.run({g.inputs[0]: x})[g.outputs[0]] for x in xs]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    s.reset_all_variables()  # LiteRT's name
    assert np.array_equal(s.run({g.inputs[0]: xs[0]})[g.outputs[0]], first[0])


def test_capture_shows_the_variable():
    g = refinterp.load(str(FIX / "streaming_state_float32.tflite"))
    s = refinterp.Session(g, "float32")
    out = s.run({g.inputs[0]: np.ones((1, 16), np.float32)}, capture="all")
    handle = next(st.node.outputs[0] for st in s.steps if st.node.op == "VarHandle")
    assert np.array_equal(out[handle], s.variables["/state"]) and out[handle].shape == (1, 32)
    assert all(np.asarray(v).dtype != object for v in out.values())
