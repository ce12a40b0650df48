"""The diff engine on hand-built IR graphs (float32 scheme): first divergence, local vs inherited
error, input checks, integer (LSB) comparisons, unmatched tensors; and Session.run_node."""
import numpy as np
import pytest

from refinterp import Session
from refinterp.compare.engine import Differ
from refinterp.compare.policy import Policy
from refinterp.dumps.model import Dump, DumpTensor
from refinterp.errors import DumpError, InputError
from refinterp.ir import Graph, Node, QuantParams, TensorInfo

CONV = dict(pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1, layout="NCHW", weight_layout="OIHW")


def cnn() -> Graph:
    rng = np.random.default_rng(0)
    T = {n: TensorInfo(n, s, "float32", layout="NCHW") for n, s in
         [("x", (1, 3, 8, 8)), ("conv1/out:0", (1, 4, 8, 8)), ("relu1", (1, 4, 8, 8)), ("conv2", (1, 4, 8, 8)),
          ("out", (1, 4, 8, 8))]}
    for n, v in [("w1", rng.normal(size=(4, 3, 3, 3))), ("b1", rng.normal(size=4)),
                 ("w2", rng.normal(size=(4, 4, 3, 3)) * 0.3), ("c", np.ones((1, 4, 1, 1)))]:
        T[n] = TensorInfo(n, v.shape, "float32", const=v.astype(np.float32))
    N = [Node("n_conv1", "Conv", ["x", "w1", "b1"], ["conv1/out:0"], dict(CONV), "Conv", 0),
         Node("n_relu", "Relu", ["conv1/out:0"], ["relu1"], {}, "Relu", 1),
         Node("n_conv2", "Conv", ["relu1", "w2", ""], ["conv2"], dict(CONV), "Conv", 2),
         Node("n_add", "Add", ["conv2", "c"], ["out"], {}, "Add", 3)]
    return Graph("cnn", "onnx", T, N, ["x"], ["out"], path="cnn.onnx")


def device_run(graph, x, fault=None, feed_x=None):
    """A 'device': the float32 kernels node by node, with an optional corruption of one tensor that
    then propagates to every later layer."""
    s = Session(graph)
    vals = {"x": x if feed_x is None else feed_x}
    for i, st in enumerate(s.steps):
        outs = s.run_node(i, [vals.get(n) if n in vals else None for n in st.node.inputs])
        for o, v in zip(st.node.outputs, outs):
            vals[o] = v.copy()
            if fault and o == fault:
                vals[o][0, 1, 2:5, 2:5] += 3.0
    return vals


def as_dump(vals, rename=lambda n: n, nhwc=()):
    d = Dump("mem", "npy")
    for k, v in vals.items():
        d.add(DumpTensor(rename(k), [v.transpose(0, 2, 3, 1) if k in nhwc else v]))
    return d


def x_img(seed=1):
    return np.random.default_rng(seed).random((1, 3, 8, 8), dtype=np.float32)


def test_run_node_matches_run_step_by_step():
    g = cnn()
    s = Session(g)
    x = x_img()
    full = s.run({"x": x}, capture="all")
    dev = device_run(g, x)
    for k in ("conv1/out:0", "relu1", "conv2", "out"):
        assert np.array_equal(full[k], dev[k])
    assert np.array_equal(s.run_node("n_relu", [full["conv1/out:0"]])[0], full["relu1"])
    with pytest.raises(InputError):
        s.run_node("nope", [])
    with pytest.raises(InputError):
        s.run_node(99, [])


def test_clean_dump_passes_with_names_sanitised_and_layout_transposed():
    g = cnn()
    vals = device_run(g, x_img())
    res = Differ(g).run(as_dump(vals, lambda n: n.replace("/", "_").replace(":", "_"), nhwc={"out"}))
    assert res.first_divergence is None and res.passed
    by = {t.name: t for t in res.tensors}
    assert by["conv1/out:0"].match == "sanitised" and any("NHWC" in n for n in by["out"].notes)
    assert all(t.status == "exact" for t in res.tensors)


def test_injected_fault_is_local_and_later_layers_inherit():
    g = cnn()
    vals = device_run(g, x_img(), fault="relu1")
    res = Differ(g).run(as_dump(vals))
    by = {t.name: t for t in res.tensors}
    assert res.first_divergence.name == "relu1" and res.first_local_divergence.name == "relu1"
    assert by["relu1"].cause == "local" and by["relu1"].local.max_abs_error == pytest.approx(3.0)
    for later in ("conv2", "out"):
        assert by[later].status == "diverged" and by[later].cause == "inherited"
        assert by[later].local.max_abs_error == 0.0 and by[later].metrics.max_abs_error > 0.1
    assert by["conv1/out:0"].status == "exact"
    assert not res.passed


def test_bgr_and_scaled_inputs_are_identified():
    g = cnn()
    x = x_img()
    for fed, expect in ((x[:, ::-1].copy(), "channel order reversed"), (x * 255.0, "x*255")):
        res = Differ(g).run(as_dump(device_run(g, x, feed_x=fed)), feeds={"x": x})
        chk = res.input_checks[0]
        assert not chk["matches"] and expect in chk["explained_by"]
        assert res.first_divergence.name == "x"
        assert all(t.cause == "inherited" for t in res.tensors if t.status == "diverged" and t.op != "Input")
    res = Differ(g).run(as_dump(device_run(g, x)), feeds={"x": x})
    assert res.input_checks[0]["matches"] and res.passed


def test_missing_and_dump_only_tensors_are_listed():
    g = cnn()
    vals = device_run(g, x_img())
    vals.pop("conv2")
    vals["extra"] = np.zeros(3, np.float32)
    res = Differ(g).run(as_dump(vals))
    by = {t.name: t for t in res.tensors}
    assert by["conv2"].status == "missing" and res.dump_only == ["extra"]
    assert by["out"].local is None  # its input is not in the dump: no local re-run
    with pytest.raises(DumpError):
        Differ(g).run(as_dump({"zzz": np.zeros(1)}))
    vals.pop("x")
    with pytest.raises(DumpError, match="inputs"):
        Differ(g).run(as_dump(vals))


def test_several_samples_aggregate():
    g = cnn()
    a, b = device_run(g, x_img(1)), device_run(g, x_img(2), fault="conv2")
    d = Dump("mem", "npy")
    for k in a:
        d.add(DumpTensor(k, [a[k], b[k]]))
    res = Differ(g).run(d)
    assert res.num_samples == 2
    t = {t.name: t for t in res.tensors}["conv2"]
    assert t.status == "diverged" and t.metrics.num_elements == 2 * 4 * 8 * 8
    assert t.metrics.exact_fraction == pytest.approx(1 - 9 / 512)


def qgraph() -> Graph:
    q = QuantParams(0.1, -5)
    T = {"x": TensorInfo("x", (1, 16), "int8", q), "y": TensorInfo("y", (1, 16), "int8", q)}
    return Graph("q", "tflite", T, [Node("relu", "Relu", ["x"], ["y"], {}, "RELU", 0)], ["x"], ["y"])


def test_integer_tensors_in_lsb_with_tolerance_override():
    g = qgraph()
    x = np.arange(-8, 8, dtype=np.int8).reshape(1, 16)
    y = np.maximum(x, -5).astype(np.int8)
    y_dev = y.copy()
    y_dev[0, 10] += 1
    d = Dump("mem", "npy")
    d.add(DumpTensor("x", [x]))
    d.add(DumpTensor("y", [y_dev]))
    res = Differ(g).run(d)
    t = {t.name: t for t in res.tensors}["y"]
    assert t.metrics.max_abs_lsb == pytest.approx(1.0) and t.status == "diverged" and t.cause == "local"
    assert t.local_expect == "exact" and t.metrics.lsb_histogram["1"] == 1
    res = Differ(g, policy=Policy.from_args(["y:1"])).run(d)
    assert res.passed
    # a dequantized float dump of the same device values gives the same LSB error
    d2 = Dump("mem", "npy")
    d2.add(DumpTensor("x", [x]))
    d2.add(DumpTensor("y", [((y_dev.astype(np.float32) + 5) * np.float32(0.1))]))
    t2 = {t.name: t for t in Differ(g).run(d2).tensors}["y"]
    assert t2.metrics.max_abs_lsb == pytest.approx(1.0, abs=1e-4)


def test_layout_confusion_and_rotation_inputs_are_identified():
    g = cnn()
    x = np.random.default_rng(5).random((1, 3, 8, 8), dtype=np.float32)
    cases = ((np.transpose(x, (0, 2, 3, 1)).reshape(x.shape), "layout: NHWC data fed as NCHW"),
             (np.rot90(x, 1, axes=(2, 3)).copy(), "rotated 90 degrees"))
    for fed, expect in cases:
        res = Differ(g).run(as_dump(device_run(g, x, feed_x=fed)), feeds={"x": x})
        assert res.input_checks[0]["explained_by"] == expect


def test_qnn_style_raw_nhwc_float_folders(tmp_path):
    from refinterp.dumps.detect import read_dump

    g = cnn()
    vals = device_run(g, x_img(), fault="conv2")
    for i in range(2):
        for name, v in vals.items():
            f = tmp_path / f"Result_{i}" / (name.replace(":", "_") + ".raw")
            f.parent.mkdir(parents=True, exist_ok=True)
            v.transpose(0, 2, 3, 1).astype(np.float32).tofile(f)
    res = Differ(g).run(read_dump(tmp_path))
    by = {t.name: t for t in res.tensors}
    assert res.num_samples == 2 and by["conv1/out:0"].match == "sanitised"
    assert by["relu1"].status == "exact" and res.first_divergence.name == "conv2"
    assert any("NHWC" in n for n in by["relu1"].notes)
