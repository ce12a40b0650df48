"""`refinterp capture --runtime onnxruntime` + `refinterp diff` on a float ONNX CNN: a clean capture
passes, an injected fault is pinpointed (local jump, inherited afterwards), a BGR-fed device is
identified, reports are written, exit codes follow the contract."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from refinterp import Session, load  # noqa: E402
from refinterp.cli.main import main  # noqa: E402
from refinterp.dumps.npydir import read_npy_dump, write_npy_dump  # noqa: E402

MODEL = str(Path(__file__).resolve().parents[1] / "fixtures" / "onnx" / "small_cnn_float32.onnx")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("ortdiff")
    g = load(MODEL)
    shape = g.tensors[g.inputs[0]].shape
    x = np.random.default_rng(3).random(shape, dtype=np.float32)
    np.savez(d / "in.npz", **{g.inputs[0]: x})
    # level disable: every tensor of the model is in the dump (the fault tests below need them all; the
    # default level captures what the fused graph computes, test_float_capture_at_level_all_...)
    assert main(["capture", MODEL, "--runtime", "onnxruntime", "--inputs", str(d / "in.npz"),
                 "--out", str(d / "dump"), "--ort-opt-level", "disable"]) == 0
    return d, g, x


def test_clean_capture_passes_and_writes_every_report(work, capsys):
    d, g, _ = work
    outs = {k: d / f"r.{k}" for k in ("json", "html", "csv", "mx")}
    rc = main(["diff", MODEL, "--against", str(d / "dump"), "--json", str(outs["json"]), "--html",
               str(outs["html"]), "--csv", str(outs["csv"]), "--model-explorer", str(outs["mx"]),
               "--save-polygraphy", str(d / "ref.json")])
    assert rc == 0
    rep = json.loads(outs["json"].read_text())
    assert rep["first_divergence"] is None and rep["scheme"]["name"] == "float32" and rep["refinterp_version"]
    compared = [t for t in rep["tensors"] if t["metrics"]]
    assert len(compared) == len(read_npy_dump(d / "dump").tensors) == len(rep["tensors"])
    assert all(t["status"] in ("exact", "within") for t in compared)
    assert all(t["local_metrics"] is not None for t in compared if t["op"] != "Input")
    html = outs["html"].read_text()
    assert "<svg" in html and "float32" in html
    assert not re.search(r"(src|href)=\"?https?:", html) and "<script" not in html
    header = outs["csv"].read_text().splitlines()[0].split(",")
    assert header[:10] == ["op_name", "tensor_idx", "num_elements", "stddev", "mean_error", "max_abs_error",
                           "mean_squared_error", "scale", "zero_point", "tensor_name"]
    assert header[10:12] == ["range", "rmse/scale"]
    mx = json.loads(outs["mx"].read_text())
    assert set(mx["results"]) == {t["name"] for t in compared} and mx["thresholds"]
    from refinterp.dumps.polygraphy import read_polygraphy

    assert set(read_polygraphy(d / "ref.json").tensors) >= set(g.outputs)


def _fault_dump(d, g, fault_index):
    """Device = ONNX Runtime up to the faulty node, then refinterp's float kernels on the corrupted
    values (so the corruption propagates exactly as a device would propagate it)."""
    dev = {k: t.data for k, t in read_npy_dump(d / "dump").tensors.items()}
    s = Session(g)
    fault_name = g.nodes[fault_index].outputs[0]
    for i, st in enumerate(s.steps):
        if i < fault_index:
            continue
        if i > fault_index:
            outs = s.run_node(i, [dev.get(n) if n else None for n in st.node.inputs])
            dev.update({o: v for o, v in zip(st.node.outputs, outs) if o})
        else:
            v = dev[fault_name].copy()
            v.reshape(-1)[: max(1, v.size // 10)] += 5.0
            dev[fault_name] = v
    out = d / f"fault{fault_index}"
    write_npy_dump(out, dev, g, "fault", overwrite=True)
    return out, fault_name


def test_injected_fault_is_pinpointed(work):
    d, g, _ = work
    fi = 3
    dump, fault_name = _fault_dump(d, g, fi)
    rc = main(["diff", MODEL, "--against", str(dump), "--json", str(d / "f.json"), "--quiet"])
    assert rc == 1
    rep = json.loads((d / "f.json").read_text())
    assert rep["first_divergence"] == fault_name and rep["first_local_divergence"] == fault_name
    by = {t["name"]: t for t in rep["tensors"]}
    assert by[fault_name]["cause"] == "local" and by[fault_name]["local_metrics"]["max_abs_error"] >= 4.9
    later = [o for n in g.nodes[fi + 1:] for o in n.outputs if o]
    assert any(by[o]["status"] == "diverged" for o in later)
    for o in later:
        assert by[o]["local_status"] in ("exact", "within"), o
        assert by[o]["cause"] in (None, "inherited")


def test_bgr_fed_device_is_identified(work, tmp_path):
    d, g, x = work
    np.savez(tmp_path / "bgr.npz", **{g.inputs[0]: x[:, ::-1].copy()})
    assert main(["capture", MODEL, "--runtime", "onnxruntime", "--inputs", str(tmp_path / "bgr.npz"),
                 "--out", str(tmp_path / "dump")]) == 0
    rc = main(["diff", MODEL, "--against", str(tmp_path / "dump"), "--inputs", str(d / "in.npz"),
               "--json", str(tmp_path / "r.json"), "--quiet"])
    assert rc == 1
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["first_divergence"] == g.inputs[0]
    assert "channel order reversed" in rep["input_checks"][0]["explained_by"]


def test_several_samples_and_bad_input_exit_codes(work, tmp_path, capsys):
    d, g, x = work
    np.savez(tmp_path / "in2.npz", **{g.inputs[0]: np.stack([x, x * 0.5])})
    assert main(["capture", MODEL, "--runtime", "onnxruntime", "--inputs", str(tmp_path / "in2.npz"),
                 "--out", str(tmp_path / "dump2")]) == 0
    assert read_npy_dump(tmp_path / "dump2").num_samples == 2
    assert main(["diff", MODEL, "--against", str(tmp_path / "dump2"), "--json", str(tmp_path / "r.json"),
                 "--quiet"]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["samples"] == 2
    assert main(["diff", MODEL, "--against", str(tmp_path / "nope")]) == 2
    assert main(["diff", MODEL, "--against", str(d / "dump"), "--format", "bogus"]) == 2
    assert main(["capture", MODEL, "--runtime", "onnxruntime", "--inputs", str(d / "in.npz"),
                 "--out", str(d / "dump")]) == 2  # non-empty folder, no --overwrite
    err = capsys.readouterr().err
    assert err.count("refinterp: error:") == 3


QDQ_MODEL = str(Path(__file__).resolve().parents[1] / "fixtures" / "onnx" / "small_cnn_qdq_s8s8.onnx")


def test_qdq_capture_at_level_all_is_the_deployed_arithmetic(tmp_path):
    """A quantize_static QDQ model captured at the default level (all): the dump holds what the fused
    graph computes (ORT's optimized graph, named back to the model), its final output equals a plain
    ORT session's, and under onnxruntime-cpu every aligned integer tensor is exact."""
    import onnxruntime as ort

    g = load(QDQ_MODEL)
    x = np.random.default_rng(3).standard_normal((2,) + tuple(g.tensors[g.inputs[0]].shape)).astype(np.float32)
    np.savez(tmp_path / "in.npz", **{g.inputs[0]: x})
    assert main(["capture", QDQ_MODEL, "--runtime", "onnxruntime", "--inputs", str(tmp_path / "in.npz"),
                 "--out", str(tmp_path / "dump")]) == 0
    dump = read_npy_dump(tmp_path / "dump")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    plain = ort.InferenceSession(QDQ_MODEL, so, providers=["CPUExecutionProvider"])
    for k in range(2):
        want = dict(zip([o.name for o in plain.get_outputs()], plain.run(None, {g.inputs[0]: x[k]})))
        for name, v in want.items():
            assert np.array_equal(np.asarray(dump.tensors[name].samples[k]), v), name
    # fused units: their DQ outputs and float op outputs do not exist on the device
    assert "relu" not in dump.tensors and "input_DequantizeLinear_Output" not in dump.tensors
    quantized = [n for n in dump.tensors if n.endswith("_QuantizeLinear_Output")]
    assert len(quantized) >= 10
    rc = main(["diff", QDQ_MODEL, "--scheme", "onnxruntime-cpu", "--against", str(tmp_path / "dump"),
               "--json", str(tmp_path / "r.json"), "--quiet"])
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rc == 0 and rep["first_divergence"] is None and rep["dump_only"] == []
    aligned = {t["name"]: t for t in rep["tensors"] if t["metrics"]}
    assert set(aligned) == set(dump.tensors)
    for name, t in aligned.items():
        if t["dtype"] in ("int8", "uint8", "int32"):
            assert t["status"] == "exact" and t["metrics"]["exact_fraction"] == 1.0, name
        else:  # float tensors: the float island (ReduceMean) is within the float tolerance
            assert t["status"] in ("exact", "within"), name
    assert all(aligned[n]["status"] == "exact" for n in quantized)
