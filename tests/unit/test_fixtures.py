"""The converter-made fixtures and the demo model: present, small, loadable, runnable.

The fixtures are made by tools/make_tflite_fixtures.py, tools/make_onnx_fixtures.py and
tools/capture_demo_dump.py (dev tools; not run here). LiteRT BUILTIN_REF and TFLM can abort the
process, so they run in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
TFLITE_DIR = REPO / "tests" / "fixtures" / "tflite"
ONNX_DIR = REPO / "tests" / "fixtures" / "onnx"
MODELS_DIR = REPO / "refinterp" / "models"
KB = 1024
TOTAL_BUDGET = 2 * KB * KB

# file -> size budget in bytes
TFLITE_BUDGETS = {
    "mobilenet_v2_tiny_int8.tflite": 300 * KB,
    "mobilenet_v3_tiny_int8.tflite": 300 * KB,
    "mobilenet_tiny_int16x8.tflite": 300 * KB,
    "attention_block_int8.tflite": 100 * KB,
    "ops_zoo_int8.tflite": 100 * KB,
    "depth_space_int8.tflite": 50 * KB,
    "small_cnn_float32.tflite": 100 * KB,
    "small_cnn_float16w.tflite": 100 * KB,
    "small_cnn_dynamic_range.tflite": 100 * KB,
}
ONNX_BUDGETS = {
    "small_cnn_float32.onnx": 100 * KB,
    "small_cnn_qdq_s8s8.onnx": 100 * KB,
    "small_cnn_qop_u8s8.onnx": 100 * KB,
    "transformer_block_float32.onnx": 200 * KB,
}
DEMO_BUDGETS = {
    "demo_int8.tflite": 200 * KB,
    "demo_input.npz": 50 * KB,
    "demo_device_dump.npz": 400 * KB,
}
# Fixtures each oracle is known to run (see tests/fixtures/tflite/README.md for the others:
# BUILTIN_REF has no int8 DEPTH_TO_SPACE (v2); TFLM has no GELU, no float16 DEQUANTIZE, no hybrid).
REF_RUNS = sorted(set(TFLITE_BUDGETS) - {"depth_space_int8.tflite"})
TFLM_RUNS = ["mobilenet_v2_tiny_int8.tflite", "mobilenet_v3_tiny_int8.tflite",
             "mobilenet_tiny_int16x8.tflite", "ops_zoo_int8.tflite", "depth_space_int8.tflite",
             "small_cnn_float32.tflite"]


def random_feed(shape, dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-100, 101, shape).astype(dtype)
    return rng.uniform(-1, 1, shape).astype(dtype)


# --------------------------------------------------------------------------- presence and size

@pytest.mark.parametrize("directory,name,budget", [
    *[(TFLITE_DIR, n, b) for n, b in TFLITE_BUDGETS.items()],
    *[(ONNX_DIR, n, b) for n, b in ONNX_BUDGETS.items()],
    *[(MODELS_DIR, n, b) for n, b in DEMO_BUDGETS.items()],
], ids=lambda v: v if isinstance(v, str) else "")
def test_fixture_exists_within_budget(directory, name, budget):
    path = directory / name
    assert path.is_file(), f"{path} missing"
    assert 0 < path.stat().st_size <= budget, f"{path}: {path.stat().st_size} > {budget} bytes"


def test_fixture_dirs_have_readme():
    for d in (TFLITE_DIR, ONNX_DIR, MODELS_DIR):
        assert (d / "README.md").is_file(), f"{d}/README.md missing"


def test_total_fixture_size_under_budget():
    files = [p for root in (REPO / "tests" / "fixtures", MODELS_DIR)
             for p in root.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert total < TOTAL_BUDGET, f"fixtures + models = {total} bytes >= {TOTAL_BUDGET}"


# --------------------------------------------------------------------------- runnable

@pytest.mark.parametrize("name", sorted(TFLITE_BUDGETS))
def test_tflite_fixture_runs_on_litert_builtin(name):
    interp_mod = pytest.importorskip("ai_edge_litert.interpreter")
    it = interp_mod.Interpreter(model_path=str(TFLITE_DIR / name), num_threads=1)
    it.allocate_tensors()
    for i, d in enumerate(it.get_input_details()):
        it.set_tensor(d["index"], random_feed(d["shape"], d["dtype"], i))
    it.invoke()
    for d in it.get_output_details():
        y = it.get_tensor(d["index"])
        assert tuple(y.shape) == tuple(d["shape"])
        if y.dtype.kind == "f":
            assert np.all(np.isfinite(y)), f"{name}: non-finite output {d['name']}"


@pytest.mark.parametrize("name", sorted(ONNX_BUDGETS))
def test_onnx_fixture_runs_on_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(str(ONNX_DIR / name), providers=["CPUExecutionProvider"])
    (inp,) = sess.get_inputs()
    (probs,) = sess.run(None, {inp.name: random_feed(inp.shape, np.float32)})
    if name.startswith("transformer"):  # a LayerNormalization ends it: rows of mean 0, variance 1
        assert probs.shape == (2, 10, 64) and np.all(np.isfinite(probs))
        assert np.allclose(probs.mean(-1), 0, atol=1e-3) and np.allclose(probs.var(-1), 1, atol=1e-2)
        return
    assert probs.shape == (1, 10)
    assert np.all(np.isfinite(probs))
    assert abs(float(probs.sum()) - 1.0) < 0.05, f"{name}: softmax sums to {probs.sum()}"


_ORACLE_SCRIPT = r"""
import json, sys
import numpy as np
oracle, paths = sys.argv[1], sys.argv[2:]
for path in paths:
    if oracle == "ref":
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        it = Interpreter(model_path=path, num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        d = it.get_input_details()[0]
        shape, dtype = d["shape"], d["dtype"]
    else:
        from tflite_micro.python.tflite_micro import runtime
        it = runtime.Interpreter.from_file(path)
        d = it.get_input_details(0)
        shape, dtype = d["shape"], d["dtype"]
    rng = np.random.default_rng(0)
    x = (rng.integers(-100, 101, shape) if np.dtype(dtype).kind in "iu"
         else rng.uniform(-1, 1, shape)).astype(dtype)
    if oracle == "ref":
        it.set_tensor(d["index"], x); it.invoke()
        y = it.get_tensor(it.get_output_details()[0]["index"])
    else:
        it.set_input(x, 0); it.invoke(); y = it.get_output(0)
    print(json.dumps({"path": path, "shape": list(y.shape)}), flush=True)
"""


@pytest.mark.parametrize("oracle,names,module", [
    ("ref", REF_RUNS, "ai_edge_litert.interpreter"),
    ("tflm", TFLM_RUNS, "tflite_micro"),
])
def test_tflite_fixtures_run_on_abortable_oracles(oracle, names, module):
    pytest.importorskip(module)
    paths = [str(TFLITE_DIR / n) for n in names]
    proc = subprocess.run([sys.executable, "-c", _ORACLE_SCRIPT, oracle, *paths],
                          capture_output=True, text=True, timeout=300)
    done = [json.loads(line)["path"] for line in proc.stdout.splitlines()
            if line.startswith("{")]
    assert proc.returncode == 0 and done == paths, (
        f"{oracle}: rc={proc.returncode}, ran {len(done)}/{len(paths)}; "
        f"stderr tail: {proc.stderr[-600:]}")


# --------------------------------------------------------------------------- demo model

def _demo_interpreter(preserve: bool):
    interp_mod = pytest.importorskip("ai_edge_litert.interpreter")
    it = interp_mod.Interpreter(model_path=str(MODELS_DIR / "demo_int8.tflite"), num_threads=1,
                                experimental_op_resolver_type=interp_mod.OpResolverType.BUILTIN,
                                experimental_preserve_all_tensors=preserve)
    it.allocate_tensors()
    return it


def test_demo_input_matches_model_input():
    it = _demo_interpreter(preserve=False)
    (detail,) = it.get_input_details()
    with np.load(MODELS_DIR / "demo_input.npz", allow_pickle=False) as npz:
        assert npz.files == [detail["name"]]
        x = npz[detail["name"]]
    assert x.dtype == detail["dtype"] == np.int8
    assert tuple(x.shape) == tuple(detail["shape"])


def test_demo_dump_holds_every_non_constant_tensor():
    it = _demo_interpreter(preserve=False)
    names = {t["index"]: t for t in it.get_tensor_details()}
    produced = {i for op in it._get_ops_details() if op["op_name"] != "DELEGATE"
                for i in op["outputs"]}
    produced |= {d["index"] for d in it.get_input_details()}
    expected = {names[i]["name"]: names[i] for i in produced}
    with np.load(MODELS_DIR / "demo_device_dump.npz", allow_pickle=False) as npz:
        assert set(npz.files) == set(expected)
        for key in npz.files:
            arr = npz[key]
            assert arr.dtype == expected[key]["dtype"], key
            assert tuple(arr.shape) == tuple(expected[key]["shape"]), key


def test_demo_dump_output_matches_litert_xnnpack():
    """The dump's output is what LiteRT BUILTIN (XNNPACK, 1 thread) gives on the demo input."""
    it = _demo_interpreter(preserve=False)
    (inp,) = it.get_input_details()
    (out,) = it.get_output_details()
    with np.load(MODELS_DIR / "demo_input.npz", allow_pickle=False) as npz:
        it.set_tensor(inp["index"], npz[inp["name"]])
    it.invoke()
    y = it.get_tensor(out["index"])
    with np.load(MODELS_DIR / "demo_device_dump.npz", allow_pickle=False) as dump:
        np.testing.assert_array_equal(dump[out["name"]], y)
        np.testing.assert_array_equal(dump[inp["name"]], it.get_tensor(inp["index"]))
