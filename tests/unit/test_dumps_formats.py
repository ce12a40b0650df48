"""Dump readers: one test per format on a sample made by the real tool where it is installable
(Polygraphy fixture written by polygraphy 0.53.6), hand-built otherwise; detection; samples."""
import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest

from refinterp.dumps.detect import detect_format, read_dump
from refinterp.errors import DumpError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dumps"


def test_npz_and_folder_of_npz_as_samples(tmp_path):
    np.savez(tmp_path / "a.npz", **{"x/y:0": np.arange(4, dtype=np.int8)})
    d = read_dump(tmp_path / "a.npz")
    assert d.format == "npz" and np.array_equal(d.tensors["x/y:0"].data, np.arange(4))
    s = tmp_path / "s"
    s.mkdir()
    for i in range(3):
        np.savez(s / f"sample_{i}.npz", t=np.full(2, i))
    d = read_dump(s)
    assert d.num_samples == 3 and [int(a[0]) for a in d.tensors["t"].samples] == [0, 1, 2]


def test_raw_with_manifest_fix_pos_big_endian_and_samples(tmp_path):
    for run, off in (("r0", 0), ("r1", 100)):
        (tmp_path / run).mkdir()
        (np.arange(6) + off).astype(">i2").tofile(tmp_path / run / "a.bin")
        np.array([1, -2, 3], np.int8).tofile(tmp_path / run / "b.raw")
    (tmp_path / "manifest.yaml").write_text(
        "byte_order: big\nsamples: [r0, r1]\ntensors:\n"
        "  - {name: conv/a, file: a.bin, dtype: int16, shape: [2, 3], layout: NHWC, scale: 0.5, zero_point: 1}\n"
        "  - {name: b, file: b.raw, dtype: int8, fix_pos: 2}\n")
    assert detect_format(tmp_path) == "raw"
    d = read_dump(tmp_path)
    a = d.tensors["conv/a"]
    assert a.shape == (2, 3) and a.dtype == np.int16 and int(a.samples[1][0, 0]) == 100
    assert a.quant.scale[0] == 0.5 and a.layout == "NHWC"
    b = d.tensors["b"]
    assert b.fix_pos == 2 and b.effective_quant().scale[0] == 0.25


def test_polygraphy_real_tool_sample():
    exp = np.load(FIX / "polygraphy_runresults_expected.npz")
    d = read_dump(FIX / "polygraphy_runresults.json")
    assert d.format == "polygraphy" and d.meta["runner"] == "onnxrt-runner" and d.num_samples == 2
    for key in exp.files:
        name, i = key.rsplit("@", 1)
        got = d.tensors[name].samples[int(i)]
        assert got.dtype == exp[key].dtype and np.array_equal(got, exp[key])


def test_polygraphy_writer_round_trip_and_pickle_refused(tmp_path):
    from refinterp.dumps.polygraphy import write_polygraphy

    vals = [{"a": np.arange(3, dtype=np.uint8), "b": np.ones((2, 2), np.float16)}, {"a": np.zeros(3, np.uint8),
                                                                                     "b": np.zeros((2, 2), np.float16)}]
    write_polygraphy(tmp_path / "o.json", vals, "refinterp")
    d = read_dump(tmp_path / "o.json")
    assert d.num_samples == 2 and d.tensors["b"].dtype == np.float16
    buf = io.BytesIO()
    np.save(buf, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    doc = {"lst": [["r", [{"outputs": {"x": {"values": {"array": base64.b64encode(buf.getvalue()).decode(),
                                                         "polygraphy_class": "ndarray"},
                                              "polygraphy_class": "LazyArray"}}}]]],
           "polygraphy_class": "RunResults"}
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(DumpError, match="pickle"):
        read_dump(tmp_path / "bad.json")
    doc["lst"][0][1][0]["outputs"]["x"] = {"tensor": "AAAA"}
    (tmp_path / "torch.json").write_text(json.dumps(doc))
    with pytest.raises(DumpError, match="torch"):
        read_dump(tmp_path / "torch.json")


def test_ort_tensorproto_folder(tmp_path):
    # Hand-built: ORT writes these files only in builds with onnxruntime_DEBUG_NODE_INPUTS_OUTPUTS=1,
    # which the onnxruntime wheel is not (the ORT_DEBUG_NODE_IO_* variables have no effect there).
    from refinterp.loaders.onnx_dump_io import write_tensorproto

    write_tensorproto(tmp_path / "conv1_Relu_0.tensorproto", "conv1/Relu:0", np.arange(6, dtype=np.float32))
    write_tensorproto(tmp_path / "q_out_rank_0.tensorproto", "", np.array([1, 2], np.uint8))
    assert detect_format(tmp_path) == "ort"
    d = read_dump(tmp_path)
    assert set(d.tensors) == {"conv1/Relu:0", "q_out"} and d.tensors["q_out"].dtype == np.uint8
    (tmp_path / "junk.tensorproto").write_bytes(b"\xff\xff\xff")
    with pytest.raises(DumpError):
        read_dump(tmp_path)


def test_tflm_layer_by_layer_file(tmp_path):
    from refinterp.dumps.tflm import INDEX_NAMES, write_tflm

    write_tflm(tmp_path / "lbl.bin", {0: np.arange(6, dtype=np.int8).reshape(1, 6)},
               [(0, 2, np.full((1, 3), -5, np.int8)), (1, 4, np.array([[1.5]], np.float32))])
    d = read_dump(tmp_path / "lbl.bin")
    assert d.format == "tflm" and d.meta["names"] == INDEX_NAMES
    assert d.tensors["#2"].data.tolist() == [[-5, -5, -5]] and d.tensors["#4"].dtype == np.float32
    assert d.tensors["#4"].index == 1
    (tmp_path / "x.bin").write_bytes(b"\x00" * 3)
    with pytest.raises(DumpError):
        read_dump(tmp_path / "x.bin")


def test_qnn_result_folders_are_samples_with_nested_names(tmp_path):
    for i in range(2):
        (tmp_path / f"Result_{i}" / "conv1").mkdir(parents=True)
        np.full(4, i, np.float32).tofile(tmp_path / f"Result_{i}" / "conv1" / "Relu_0.raw")
    assert detect_format(tmp_path) == "qnn"
    d = read_dump(tmp_path)
    t = d.tensors["conv1/Relu_0"]
    assert d.num_samples == 2 and t.raw and t.layout == "NHWC" and t.samples[1].nbytes == 16


def test_aimet_layer_outputs_with_name_order(tmp_path):
    for i in range(2):
        p = tmp_path / "outputs" / f"layer_outputs_{i}"
        p.mkdir(parents=True)
        np.zeros(2, np.float32).tofile(p / "b.raw")
        np.ones(2, np.float32).tofile(p / "a.raw")
    (tmp_path / "layer_output_name_order.json").write_text(json.dumps({"layer_output_names": ["b", "a"]}))
    d = read_dump(tmp_path)
    assert d.format == "aimet" and list(d.tensors) == ["b", "a"] and d.num_samples == 2


def test_vitis_deploy_check_folder(tmp_path):
    g = tmp_path / "deploy_check_data_int" / "Net"
    g.mkdir(parents=True)
    np.array([1, -1, 7], np.int8).tofile(g / "Net__conv1_fix.bin")
    (g / "Net__relu_fix.txt").write_text("3\n-4\n5\n")
    np.zeros(9, np.int8).tofile(g / "Net__conv1_weight.bin")
    d = read_dump(tmp_path / "deploy_check_data_int")
    assert d.format == "vitis"
    assert d.tensors["Net/Net__conv1"].data.tolist() == [1, -1, 7]
    assert d.tensors["Net/Net__relu"].data.tolist() == [3, -4, 5]
    assert not any("weight" in n for n in d.tensors)


def test_per_sample_subfolders_and_unknown(tmp_path):
    from refinterp.dumps.npydir import write_npy_dump

    for i in range(2):
        write_npy_dump(tmp_path / f"s{i}", {"t": np.full(3, i)})
    d = read_dump(tmp_path)
    assert d.num_samples == 2 and d.meta["per_sample_folders"] == ["s0", "s1"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DumpError):
        read_dump(tmp_path / "empty")
    with pytest.raises(DumpError):
        read_dump(tmp_path / "s0", "nope")


def test_polygraphy_runner_selection(tmp_path):
    from refinterp.dumps.polygraphy import read_polygraphy, write_polygraphy

    write_polygraphy(tmp_path / "a.json", [{"t": np.zeros(2)}], "first")
    doc = json.loads((tmp_path / "a.json").read_text())
    second = json.loads(json.dumps(doc["lst"][0]))
    second[0] = "second"
    second[1][0]["outputs"]["t"]["values"]["array"] = doc["lst"][0][1][0]["outputs"]["t"]["values"]["array"]
    doc["lst"].append(second)
    (tmp_path / "b.json").write_text(json.dumps(doc))
    assert read_polygraphy(tmp_path / "b.json").meta["runners"] == ["first", "second"]
    assert read_polygraphy(tmp_path / "b.json", "second").meta["runner"] == "second"
    with pytest.raises(DumpError, match="no runner"):
        read_polygraphy(tmp_path / "b.json", "third")
