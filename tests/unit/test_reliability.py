"""Hostile inputs get one clean line and exit 2 from the CLI (checked in a subprocess, as a user sees it);
the memory budget is checked before allocating; runs are deterministic across runs and thread counts;
NaN / Inf in float tensors never crash a run or a comparison."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import refinterp
from refinterp import limits
from refinterp.errors import ModelError, ResourceError
from tests.tflite_builder import TFLiteBuilder

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
TFL = FIX / "tflite"
ONX = FIX / "onnx"


def cli(*args, env: dict | None = None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "refinterp", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=e)


def assert_clean(r, *needles: str) -> str:
    """Exit 2, no traceback, exactly one line on stderr naming every needle."""
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# -- hostile model files ------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".tflite", ".onnx"])
def test_empty_model(tmp_path, suffix):
    p = tmp_path / f"empty{suffix}"
    p.write_bytes(b"")
    assert_clean(cli("run", p, "--random-inputs", "0"), str(p))


@pytest.mark.parametrize("src", [TFL / "mobilenet_v2_tiny_int8.tflite", ONX / "small_cnn_qdq_s8s8.onnx"])
@pytest.mark.parametrize("keep", [0.5, 0.02])
def test_truncated_model(tmp_path, src, keep):
    data = src.read_bytes()
    p = tmp_path / f"cut{src.suffix}"
    p.write_bytes(data[: int(len(data) * keep)])
    assert_clean(cli("run", p, "--random-inputs", "0"), str(p))


def test_bit_flipped_tflite_root(tmp_path):
    data = bytearray((TFL / "small_cnn_float32.tflite").read_bytes())
    data[2] ^= 0x10  # the root table offset now points past the end of the file
    p = tmp_path / "flip.tflite"
    p.write_bytes(bytes(data))
    assert_clean(cli("run", p, "--random-inputs", "0"), str(p), "malformed TFLite")


def test_bit_flipped_tflite_tensor_index(tmp_path):
    schema = pytest.importorskip("ai_edge_litert.schema_py_generated")
    import flatbuffers

    b = TFLiteBuilder()
    x = b.tensor("x", [1, 4], "float32")
    y = b.tensor("y", [1, 4], "float32")
    b.op("RELU", [x], [y])
    m = schema.ModelT.InitFromPackedBuf(bytearray(b.build(inputs=[x], outputs=[y])), 0)
    op = m.subgraphs[0].operators[0]
    op.outputs = np.array([int(op.outputs[0]) ^ (1 << 30)], np.int32)  # one flipped bit in the index
    fb = flatbuffers.Builder(256)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    p = tmp_path / "flip.tflite"
    p.write_bytes(bytes(fb.Output()))
    assert_clean(cli("run", p, "--random-inputs", "0"), str(p), "tensor index")


def test_bit_flipped_onnx(tmp_path):
    data = bytearray((ONX / "small_cnn_float32.onnx").read_bytes())
    data[0] ^= 0x07  # field 1 varint tag (0x08) becomes wire type 7: not protobuf
    p = tmp_path / "flip.onnx"
    p.write_bytes(bytes(data))
    assert_clean(cli("run", p, "--random-inputs", "0"), str(p))


def test_bit_flips_never_crash_in_process(tmp_path):
    """A fixed set of single-bit flips over a model: load/prepare/run either work or raise refinterp errors."""
    src = (TFL / "depth_space_int8.tflite").read_bytes()
    rng = np.random.default_rng(9)
    p = tmp_path / "f.tflite"
    for pos, bit in zip(rng.integers(0, len(src), 150), rng.integers(0, 8, 150)):
        data = bytearray(src)
        data[pos] ^= 1 << int(bit)
        p.write_bytes(bytes(data))
        try:
            g = refinterp.load(p)
            s = refinterp.Session(g, "tflite-reference")
            x = g.tensors[g.inputs[0]]
            s.run({g.inputs[0]: np.zeros([d or 1 for d in x.shape], x.dtype)})
        except refinterp.RefinterpError:
            pass


# -- ONNX external data ------------------------------------------------------------------------
def _external_model(folder: Path, location: str) -> Path:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        w.external_data.add(key=k, value=v)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "ext", [x], [y], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "model.onnx"
    p.write_bytes(m.SerializeToString())
    return p


def test_external_data_inside_folder_loads(tmp_path):
    p = _external_model(tmp_path / "m", "w.bin")
    (tmp_path / "m" / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    out = refinterp.Session(refinterp.load(p)).run({"x": np.ones(4, np.float32)})
    np.testing.assert_array_equal(out["y"], np.arange(4, dtype=np.float32) + 1)


@pytest.mark.parametrize("location,why", [("../secret.bin", "'..'"), ("sub/../../secret.bin", "'..'"),
                                           ("ABS", "absolute"), ("link.bin", "outside")])
def test_external_data_traversal_refused(tmp_path, location, why):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.full(4, 7, np.float32).tobytes())
    folder = tmp_path / "m"
    folder.mkdir()
    if location == "ABS":
        location = str(secret)
    if location == "link.bin":
        (folder / "link.bin").symlink_to(secret)
    p = _external_model(folder, location)
    assert_clean(cli("run", p, "--random-inputs", "0"), str(p), "external data", why)


# -- absurd declared shapes and the memory budget ----------------------------------------------
def _relu_model(path: Path, shape: list[int], dtype: str = "int8") -> Path:
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype)
    y = b.tensor("y", shape, dtype)
    b.op("RELU", [x], [y])
    path.write_bytes(b.build(inputs=[x], outputs=[y]))
    return path


def test_tflite_tensor_of_2_pow_40_elements(tmp_path):
    p = _relu_model(tmp_path / "huge.tflite", [1 << 20, 1 << 20])
    line = assert_clean(cli("run", p, "--random-inputs", "0"), str(p), "tensor 'x'", "memory budget")
    assert "1099511627776 elements" in line


def test_tflite_absurd_shape_is_malformed(tmp_path):
    p = _relu_model(tmp_path / "absurd.tflite", [1 << 30, 1 << 30, 1 << 30])
    assert_clean(cli("run", p, "--random-inputs", "0"), str(p), "absurd shape")


def test_onnx_initializer_with_huge_dims(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], vals=[1.0, 2.0, 3.0, 4.0])
    w.dims[:] = [1 << 20, 1 << 20, 4]  # 16 bytes of data, 2**42 declared elements
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "big", [x], [y], initializer=[w])
    p = tmp_path / "big.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    assert_clean(cli("run", p, "--random-inputs", "0"), str(p), "initializer 'w'", "memory budget")


def test_onnx_negative_dim_refused(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, -3])  # (-1 alone means unknown)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "neg", [x], [y])
    p = tmp_path / "neg.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    with pytest.raises(ModelError, match="negative dimension"):
        refinterp.load(p)


def test_max_memory_option_and_env(tmp_path):
    p = _relu_model(tmp_path / "mid.tflite", [1, 64, 64, 64], "float32")  # 1 MiB per tensor
    assert cli("--max-memory", "2M", "run", p, "--random-inputs", "0", "--quiet").returncode == 0
    assert_clean(cli("--max-memory", "512K", "run", p, "--random-inputs", "0"), "memory budget", "512.0 KiB")
    assert_clean(cli("run", p, "--random-inputs", "0", env={"REFINTERP_MAX_MEMORY": "100K"}), "memory budget")
    assert_clean(cli("--max-memory", "lots", "run", p), "--max-memory", "cannot parse")


def test_model_file_over_budget_is_not_read(tmp_path):
    p = _relu_model(tmp_path / "m.tflite", [1, 4], "float32")
    limits.set_max_memory(64)
    try:
        with pytest.raises(ResourceError, match="model file"):
            refinterp.load(p)
    finally:
        limits.set_max_memory(None)


def test_check_alloc_before_allocating():
    limits.set_max_memory("1M")
    try:
        assert limits.check_alloc(1 << 18, 4, "t") == 1 << 20
        with pytest.raises(ResourceError, match="memory budget"):
            limits.check_alloc((1 << 18) + 1, 4, "t", "f.tflite")
        with pytest.raises(ResourceError, match="negative"):
            limits.check_shape([2, -1], 4, "t")
        assert limits.check_shape([2, None, 3], 4, "t") == 6
    finally:
        limits.set_max_memory(None)
    assert limits.parse_size("2G") == 2 << 30 and limits.parse_size("1.5MiB") == 3 << 19
    assert limits.max_memory() > 0


# -- no pickle ---------------------------------------------------------------------------------
class _Payload:
    """Unpickling this creates ``marker``: proof the payload ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _pickled_array(marker: Path) -> np.ndarray:
    a = np.empty(1, dtype=object)
    a[0] = _Payload(marker)
    return a


def test_pickled_npz_dump_refused(tmp_path):
    marker = tmp_path / "pwned"
    dump = tmp_path / "dump.npz"
    np.savez(dump, **{"StatefulPartitionedCall_1:0": _pickled_array(marker)})
    r = cli("diff", TFL / "small_cnn_float32.tflite", "--against", dump)
    assert_clean(r, str(dump), "pickle")
    assert not marker.exists()


def test_pickled_npy_in_dump_folder_refused(tmp_path):
    marker = tmp_path / "pwned"
    folder = tmp_path / "dump"
    folder.mkdir()
    np.save(folder / "StatefulPartitionedCall_1_0.npy", _pickled_array(marker))
    r = cli("diff", TFL / "small_cnn_float32.tflite", "--against", folder)
    assert_clean(r, "pickle")
    assert not marker.exists()


def test_pickled_npy_input_refused(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "x.npy"
    np.save(evil, _pickled_array(marker))
    r = cli("run", TFL / "small_cnn_float32.tflite", "--input", f"serving_default_input:0={evil}")
    assert_clean(r, str(evil), "pickle")
    assert not marker.exists()
    assert pickle  # the payload class above is only ever pickled by numpy's writer, never loaded


def test_pickled_array_in_polygraphy_json_refused(tmp_path):
    import base64
    import io
    import json

    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    np.save(buf, _pickled_array(marker))  # an object array: numpy writes a pickle after the header
    enc = {"polygraphy_class": "ndarray", "array": base64.b64encode(buf.getvalue()).decode()}
    doc = {"lst": [["evil-runner", [{"outputs": {"StatefulPartitionedCall_1:0": enc}, "runtime": None,
                                      "runner_name": "evil-runner", "polygraphy_class": "IterationResult"}]]],
           "polygraphy_class": "RunResults"}
    f = tmp_path / "results.json"
    f.write_text(json.dumps(doc))
    r = cli("diff", TFL / "small_cnn_float32.tflite", "--against", f)
    assert_clean(r, str(f), "pickle")
    assert not marker.exists()


# -- determinism -------------------------------------------------------------------------------
@pytest.mark.parametrize("model,scheme", [(TFL / "mobilenet_v2_tiny_int8.tflite", "tflite-reference"),
                                          (TFL / "attention_block_int8.tflite", "tflite-reference"),
                                          (ONX / "small_cnn_float32.onnx", "float32")])
def test_deterministic_across_runs_and_threads(tmp_path, model, scheme):
    dumps = []
    for k, threads in enumerate(("1", "2", "2")):
        d = tmp_path / f"d{k}"
        r = cli("run", model, "--scheme", scheme, "--random-inputs", "3", "--dump", d, "--quiet",
                env={"NUMBA_NUM_THREADS": threads, "REFINTERP_THREADS": threads, "OPENBLAS_NUM_THREADS": threads})
        assert r.returncode == 0, r.stderr
        dumps.append({f.name: f.read_bytes() for f in sorted(d.glob("*.npy"))})
    assert len(dumps[0]) > 3
    assert dumps[0] == dumps[1] == dumps[2]


# -- NaN / Inf ---------------------------------------------------------------------------------
@pytest.mark.parametrize("model,schemes", [
    (TFL / "small_cnn_float32.tflite", ("float32", "tflite-reference")),
    (TFL / "small_cnn_dynamic_range.tflite", ("float32", "tflite-reference")),
    (TFL / "small_cnn_float16w.tflite", ("float32",)),
    (ONX / "small_cnn_float32.onnx", ("float32", "onnxruntime-cpu")),
    (ONX / "small_cnn_qdq_s8s8.onnx", ("float32", "onnxruntime-cpu", "onnx-reference")),
    (ONX / "small_cnn_qop_u8s8.onnx", ("float32", "onnxruntime-cpu")),
])
def test_nan_inf_inputs_do_not_crash(model, schemes):
    g = refinterp.load(model)
    name = g.inputs[0]
    x = np.random.default_rng(0).uniform(-1, 1, [d or 1 for d in g.tensors[name].shape]).astype(np.float32)
    flat = x.reshape(-1)
    flat[::7] = np.nan
    flat[1::11] = np.inf
    flat[2::13] = -np.inf
    for scheme in schemes:
        with np.errstate(all="ignore"):
            out = refinterp.Session(g, scheme).run({name: x}, capture="all")
        for o in g.outputs:
            assert out[o].shape == tuple(d or 1 for d in g.tensors[o].shape)


def test_nan_in_dump_is_reported_not_a_crash(tmp_path):
    model = TFL / "small_cnn_float32.tflite"
    g = refinterp.load(model)
    name = g.inputs[0]
    x = np.random.default_rng(1).uniform(-1, 1, [d or 1 for d in g.tensors[name].shape]).astype(np.float32)
    trace = refinterp.Session(g).run({name: x}, capture="all")
    bad = {k: v.copy() for k, v in trace.items()}
    first = next(n.outputs[0] for n in g.nodes)
    bad[first].reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    np.savez(tmp_path / "in.npz", **{name: x})
    np.savez(tmp_path / "dump.npz", **bad)
    r = cli("diff", model, "--against", tmp_path / "dump.npz", "--inputs", tmp_path / "in.npz", "--quiet",
            "--json", tmp_path / "r.json")
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert first in (tmp_path / "r.json").read_text()
