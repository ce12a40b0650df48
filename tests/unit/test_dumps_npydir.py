"""refinterp's own .npy dump folder: atomic writing, refusal to overwrite, round trip, samples."""
import json

import numpy as np
import pytest

from refinterp.dumps.npydir import read_npy_dump, write_npy_dump
from refinterp.errors import DumpError, OutputError
from refinterp.ir import Graph, Node, QuantParams, TensorInfo


def _graph():
    t = {"x": TensorInfo("x", (1, 2, 2, 3), "int8", QuantParams(0.5, -3), layout="NHWC"),
         "y/out:0": TensorInfo("y/out:0", (1, 2, 2, 3), "int8", QuantParams([0.1, 0.2, 0.3], 0, axis=3))}
    return Graph("g", "tflite", t, [Node("relu", "Relu", ["x"], ["y/out:0"], source_op="RELU", index=4)],
                 ["x"], ["y/out:0"], path="m.tflite")


def test_round_trip_keeps_values_dtypes_and_metadata(tmp_path):
    rng = np.random.default_rng(0)
    vals = {"x": rng.integers(-128, 128, (1, 2, 2, 3), dtype=np.int8),
            "y/out:0": rng.integers(-128, 128, (1, 2, 2, 3), dtype=np.int8)}
    out = write_npy_dump(tmp_path / "d", vals, _graph(), "tflite-reference")
    m = json.loads((out / "manifest.json").read_text())
    assert m["scheme"] == "tflite-reference" and m["model"] == {"path": "m.tflite", "format": "tflite"}
    e = m["tensors"][1]
    assert e["name"] == "y/out:0" and e["op"] == "Relu" and e["node"] == "relu" and e["index"] == 4
    assert e["quantization"] == {"scale": pytest.approx([0.1, 0.2, 0.3]), "zero_point": [0, 0, 0], "axis": 3}
    assert "/" not in e["file"] and ":" not in e["file"]
    d = read_npy_dump(out)
    assert list(d.tensors) == ["x", "y/out:0"]
    for k, v in vals.items():
        assert d.tensors[k].data.dtype == v.dtype and np.array_equal(d.tensors[k].data, v)
    assert d.tensors["x"].quant.zero_point[0] == -3 and d.tensors["x"].layout == "NHWC"
    assert d.tensors["y/out:0"].op == "Relu"


def test_names_that_sanitise_alike_get_distinct_files(tmp_path):
    vals = {"a/b": np.zeros(1), "a:b": np.ones(1), "A_b": np.full(1, 2.0)}
    out = write_npy_dump(tmp_path / "d", vals)
    files = [e["file"] for e in json.loads((out / "manifest.json").read_text())["tensors"]]
    assert len({f.lower() for f in files}) == 3
    d = read_npy_dump(out)
    assert [float(d.tensors[k].data[0]) for k in vals] == [0.0, 1.0, 2.0]


def test_refuses_non_empty_folder_and_overwrite_keeps_unnamed_files(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "keep.txt").write_text("mine")
    with pytest.raises(OutputError):
        write_npy_dump(d, {"a": np.zeros(2)})
    write_npy_dump(d, {"a": np.zeros(2)}, overwrite=True)
    assert (d / "keep.txt").read_text() == "mine"
    assert not [p for p in d.iterdir() if p.name.endswith(".tmp")]
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(OutputError):
        write_npy_dump(tmp_path / "f.txt", {"a": np.zeros(1)})


def test_samples_axis_round_trip_and_check(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = write_npy_dump(tmp_path / "d", {"a": a}, samples=3)
    d = read_npy_dump(out)
    assert d.num_samples == 3 and np.array_equal(d.tensors["a"].samples[2], a[2])
    with pytest.raises(OutputError):
        write_npy_dump(tmp_path / "e", {"a": a}, samples=2)


def test_folder_without_manifest_and_pickled_npy_refused(tmp_path):
    np.save(tmp_path / "t1.npy", np.arange(3))
    d = read_npy_dump(tmp_path)
    assert list(d.tensors) == ["t1"]
    np.save(tmp_path / "bad.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DumpError):
        read_npy_dump(tmp_path)


def test_manifest_cannot_point_outside_the_folder(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"format_version": 1, "tensors": [
        {"name": "a", "file": "../x.npy"}]}))
    with pytest.raises(DumpError):
        read_npy_dump(tmp_path)
