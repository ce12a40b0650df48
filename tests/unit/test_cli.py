"""CLI behaviour: one-line errors with exit 2, run/inspect/schemes happy paths, no overwrite."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from refinterp.cli.main import main


def _tiny_onnx(path, op="Relu"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    b = helper.make_tensor("b", TensorProto.FLOAT, [1, 4], [0.5, -1.0, 2.0, 0.0])
    nodes = [helper.make_node("Add", ["x", "b"], ["s"], name="add"), helper.make_node(op, ["s"], ["y"], name="act")]
    g = helper.make_graph(nodes, "tiny", [x], [y], initializer=[b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))
    return path


def _cli(*args):
    """Run the CLI in a subprocess to see exactly what a user sees."""
    return subprocess.run([sys.executable, "-m", "refinterp", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def test_not_a_model_is_one_line(tmp_path):
    bad = tmp_path / "notes.onnx"
    bad.write_text("hello, this is not a model")
    r = _cli("run", bad)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0]


def test_missing_file(tmp_path):
    r = _cli("inspect", tmp_path / "nope.tflite")
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_unsupported_op_names_op_node_and_format(tmp_path):
    p = _tiny_onnx(tmp_path / "m.onnx", op="Det")  # an op refinterp does not implement
    r = _cli("run", p)
    assert r.returncode == 2, r.stderr
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1
    assert "Det" in msg and "'act'" in msg and "onnx" in msg


def test_missing_and_misshaped_input(tmp_path):
    p = _tiny_onnx(tmp_path / "m.onnx")
    np.save(tmp_path / "bad.npy", np.zeros((2, 3), np.float32))
    r = _cli("run", p, "--input", f"x={tmp_path / 'bad.npy'}")
    assert r.returncode == 2
    assert "'x'" in r.stderr and "[1, 4]" in r.stderr and "float32" in r.stderr
    np.savez(tmp_path / "in.npz", other=np.zeros((1, 4), np.float32), x=np.zeros((1, 4), np.float32))
    r = _cli("run", p, "--inputs", tmp_path / "in.npz")
    assert r.returncode == 2 and "unknown input 'other'" in r.stderr


def test_run_outputs_and_dump(tmp_path):
    p = _tiny_onnx(tmp_path / "m.onnx")
    x = np.array([[1.0, 2.0, -3.0, 4.0]], np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "out.npz"
    assert main(["run", str(p), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(out),
                 "--dump", str(tmp_path / "dump"), "--quiet"]) == 0
    with np.load(out, allow_pickle=False) as z:
        np.testing.assert_array_equal(z["y"], np.maximum(x + np.array([0.5, -1.0, 2.0, 0.0], np.float32), 0))
    manifest = json.loads((tmp_path / "dump" / "manifest.json").read_text())
    names = [t["name"] for t in manifest["tensors"]]
    assert {"x", "s", "y"} <= set(names)
    # refuses to overwrite without being asked
    r = _cli("run", p, "--inputs", tmp_path / "in.npz", "--outputs", out)
    assert r.returncode == 2 and "--overwrite" in r.stderr
    r = _cli("run", p, "--inputs", tmp_path / "in.npz", "--dump", tmp_path / "dump")
    assert r.returncode == 2 and "--overwrite" in r.stderr


def test_inspect_and_schemes(tmp_path, capsys):
    p = _tiny_onnx(tmp_path / "m.onnx")
    assert main(["inspect", str(p), "--scheme", "float32", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["op"] for n in doc["nodes"]] == ["Add", "Relu"]
    assert doc["nodes"][0]["variant"] == "float"
    assert main(["schemes"]) == 0
    assert "float32" in capsys.readouterr().out


def test_unknown_scheme(tmp_path):
    p = _tiny_onnx(tmp_path / "m.onnx")
    r = _cli("run", p, "--scheme", "no-such-scheme")
    assert r.returncode == 2 and "unknown scheme 'no-such-scheme'" in r.stderr


def test_written_files_get_the_users_usual_mode(tmp_path):
    """Atomic writes go through mkstemp/mkdtemp (0600/0700); the results must not stay private."""
    import os
    import stat

    p = _tiny_onnx(tmp_path / "m.onnx")
    old = os.umask(0o022)
    try:
        assert main(["run", str(p), "--random-inputs", "0", "--outputs", str(tmp_path / "o.npz"),
                     "--dump", str(tmp_path / "d"), "--quiet"]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "o.npz").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "d" / "manifest.json").stat().st_mode) == 0o644
