"""Activations the HTP fuses into their producer, against Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0) run as
deployed: only the final output exposed, no intermediate tensor (exposing the producer's output keeps it from
fusing).  v73 computes HardSwish / LeakyRelu after a Conv (depthwise too), LeakyRelu after a ConvTranspose and both
after a MatMul on the producer's own result -- not the table on its output codes, which refinterp ran before (a
wrong answer in ``run``): refused now.  With the producer's output read elsewhere too (here: a graph output) the
Conv's is kept and the table holds; v68 fuses nothing here (kernels/qnn_htp/activation.py)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

import refinterp
from refinterp.errors import UnsupportedOpError
from tests.conformance.test_qnn_htp_numerics import _init, _model, htp_batch_outputs
from tests.conformance.test_qnn_htp_ops import _qdq_in, _qdq_out

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32
ONNX_TYPE = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8}


def _job(rng, producer: str, act: str, dt: str, shared: bool = False):
    """x -> producer -> Q(p) -> act -> Q(y); y (and with ``shared`` p's codes) the graph outputs.  The producer's
    output parameters leave part of its range saturated, where the table on its codes and the fused result part."""
    mid = 128 if dt == "uint8" else 0
    inits, nodes = _qdq_in("x", float(F(rng.uniform(0.01, 0.04))), mid, dt)
    shape = [1, 8, 16] if producer == "MatMul" else [1, 4, 8, 8]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    if producer == "Add":
        i, n = _qdq_in("x2", 0.03, mid, dt)
        inits += i
        nodes += n + [helper.make_node("Add", ["x_d", "x2_d"], ["p"])]
        ins.append(helper.make_tensor_value_info("x2", TensorProto.FLOAT, shape))
    else:
        w_shape = {"Conv": (8, 4, 3, 3), "DWConv": (4, 1, 3, 3), "DWConv/2": (4, 1, 3, 3), "DWConv5/2": (4, 1, 5, 5),
                   "ConvTranspose": (4, 4, 2, 2), "MatMul": (16, 16)}
        inits += [_init(rng.integers(-127, 128, w_shape[producer]), "w", np.int8), _init(0.02, "ws", F),
                  _init(0, "wz", np.int8)]
        nodes.append(helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]))
        attrs = {"Conv": {"pads": [1, 1, 1, 1]}, "DWConv": {"pads": [1, 1, 1, 1], "group": 4},
                 "DWConv/2": {"pads": [1, 1, 1, 1], "group": 4, "strides": [2, 2]},
                 "DWConv5/2": {"pads": [2, 2, 2, 2], "group": 4, "strides": [2, 2]},
                 "ConvTranspose": {"strides": [2, 2]}, "MatMul": {}}[producer]
        nodes.append(helper.make_node("Conv" if producer.startswith("DWConv") else producer, ["x_d", "wd"], ["p"],
                                      **attrs))
    i, n = _qdq_out("p", "pq", float(F(rng.uniform(0.02, 0.06))), int(rng.integers(mid - 68, mid + 72)), dt)
    inits += i
    nodes += n + [helper.make_node(act, ["pq_dq"], ["a"], **({"alpha": 0.1} if act == "LeakyRelu" else {}))]
    i, n = _qdq_out("a", "y", float(F(rng.uniform(0.01, 0.04))), int(rng.integers(mid - 98, mid + 92)), dt)
    outs = ["y"] + (["pq"] if shared else [])
    m = _model(nodes + n, inits + i, ins, [helper.make_tensor_value_info(o, ONNX_TYPE[dt], None) for o in outs])
    feeds = {v.name: rng.uniform(-3, 3, [d.dim_value for d in v.type.tensor_type.shape.dim]).astype(F) for v in ins}
    return m, feeds, outs


def _deployed(tmp_path, jobs, arch: str) -> list[dict]:
    """The emulator's graph outputs of each (model, feeds, outputs), the models unchanged."""
    return htp_batch_outputs(tmp_path, jobs, arch)


def _table(m, act: str, codes, dt: str) -> np.ndarray:
    """The activation on the producer's codes, rounded half up (kernels/qnn_htp/activation.py's table)."""
    from onnx import numpy_helper

    c = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    x = (codes.astype(np.int64) - int(c["pq_z"])) * float(c["pq_s"])
    f = x * np.clip(x + 3, 0, 6) / 6 if act == "HardSwish" else np.where(x >= 0, x, float(F(0.1)) * x)
    info = np.iinfo(dt)
    return np.clip(np.floor(f / float(c["y_s"]) + 0.5) + int(c["y_z"]), info.min, info.max).astype(dt)


def _ours(tmp_path, i: int, feeds, arch: str):
    return refinterp.Session(refinterp.load(str(tmp_path / f"m{i}.onnx")), f"qnn-htp-v{arch}").run(feeds)


FUSED_V73 = [("Conv", "HardSwish"), ("DWConv", "HardSwish"), ("MatMul", "HardSwish"), ("Conv", "LeakyRelu"),
             ("DWConv", "LeakyRelu"), ("ConvTranspose", "LeakyRelu"), ("MatMul", "LeakyRelu")]
# not fused: a strided depthwise Conv (3x3 and 5x5 by 2: a MobileNetV3's stride-2 blocks) among them
KEPT_V73 = [("Add", "HardSwish"), ("Add", "LeakyRelu"), ("ConvTranspose", "HardSwish"), ("Conv", "Sigmoid"),
            ("MatMul", "Gelu"), ("DWConv/2", "HardSwish"), ("DWConv5/2", "HardSwish"),
            ("DWConv/2", "LeakyRelu"), ("DWConv5/2", "LeakyRelu")]


@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_v73_fused_activations_are_refused(tmp_path, dt):
    """Each fused pair (LeakyRelu: uint8 only, the QNN EP does not take it on int8): refused; the same model with
    the producer's output also a graph output runs unfused on the HTP and refinterp's table equals it (Conv,
    ConvTranspose), and that result differs from the deployed one somewhere -- the fusion is real; pairs the HTP
    does not fuse equal the deployed output."""
    rng = np.random.default_rng(zlib.crc32(repr(("fused", dt)).encode()))
    pairs = [p for p in FUSED_V73 if dt == "uint8" or p[1] != "LeakyRelu"]
    jobs = []
    for producer, act in pairs:
        base = rng.bit_generator.state
        jobs.append(_job(rng, producer, act, dt))
        rng.bit_generator.state = base  # the shared twin: the same parameters and inputs
        jobs.append(_job(rng, producer, act, dt, shared=True))
    kept = [_job(rng, producer, act, dt) for producer, act in KEPT_V73 if dt == "uint8" or act != "LeakyRelu"]
    got = _deployed(tmp_path, jobs + kept, "73")
    for k, (producer, act) in enumerate(pairs):
        (m, feeds, _), deployed, shared = jobs[2 * k], got[2 * k], got[2 * k + 1]
        with pytest.raises(UnsupportedOpError, match="fuses it into the producer"):
            _ours(tmp_path, 2 * k, feeds, "73")
        # the table on the producer's codes (what refinterp ran before) is not what the deployed HTP computes
        assert np.count_nonzero(_table(m, act, shared["pq"], dt) != deployed["y"]) > 0, (producer, act)
        if producer == "MatMul":  # refused with its output read elsewhere too: at uint8 the table misses there too
            assert dt == "int8" or np.count_nonzero(_table(m, act, shared["pq"], dt) != shared["y"]) > 0, act
            with pytest.raises(UnsupportedOpError, match="fuses it into the producer"):
                _ours(tmp_path, 2 * k + 1, feeds, "73")
        else:
            ours = _ours(tmp_path, 2 * k + 1, feeds, "73")
            assert np.array_equal(ours["y"], shared["y"]) and np.array_equal(ours["pq"], shared["pq"]), (producer, act)
    for k, (m, feeds, _) in enumerate(kept, start=len(jobs)):
        assert np.array_equal(_ours(tmp_path, k, feeds, "73")["y"], got[k]["y"]), k


@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_v68_fuses_none_of_them(tmp_path, dt):
    rng = np.random.default_rng(zlib.crc32(repr(("fused68", dt)).encode()))
    pairs = [p for p in FUSED_V73 + KEPT_V73 if dt == "uint8" or p[1] != "LeakyRelu"]
    jobs = [_job(rng, producer, act, dt) for producer, act in pairs]
    for k, ((m, feeds, _), got) in enumerate(zip(jobs, _deployed(tmp_path, jobs, "68"))):
        assert np.array_equal(_ours(tmp_path, k, feeds, "68")["y"], got["y"]), pairs[k]


def test_capture_leaves_out_a_fused_producers_output(tmp_path):
    """``capture --runtime qnn-htp``: exposing the Conv's output before a HardSwish changes what v73 computes (it
    would not fuse), so the capture leaves that tensor out, says so, and keeps the rest; ``diff`` then anchors the
    refused HardSwish on the device's values and the Conv after it is exact.  Before: no capture at all."""
    from tests.conformance.test_qnn_htp_transformer import _cli

    rng = np.random.default_rng(3)
    m, feeds, _ = _job(rng, "Conv", "HardSwish", "uint8")
    g = m.graph  # a second Conv after the HardSwish: y -> DQ -> Conv -> Q(z)
    g.initializer.extend([_init(rng.integers(-127, 128, (4, 8, 1, 1)), "w2", np.int8)])
    g.node.extend([helper.make_node("DequantizeLinear", ["y", "y_s", "y_z"], ["y_d"]),
                   helper.make_node("DequantizeLinear", ["w2", "ws", "wz"], ["w2d"]),
                   helper.make_node("Conv", ["y_d", "w2d"], ["c2"]),
                   helper.make_node("QuantizeLinear", ["c2", "pq_s", "pq_z"], ["z"])])
    del g.output[:]
    g.output.extend([helper.make_tensor_value_info("z", TensorProto.UINT8, None)])
    model, inputs, dump = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "dump"
    model.write_bytes(m.SerializeToString())
    np.savez(inputs, **feeds)
    r = _cli("capture", str(model), "--runtime", "qnn-htp", "--htp-arch", "73", "--inputs", str(inputs),
             "--out", str(dump))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "left out 1 tensor(s)" in r.stdout and "pq" in r.stdout, r.stdout
    assert not (dump / "pq.npy").exists() and (dump / "y.npy").exists() and (dump / "z.npy").exists()
    got = _deployed(tmp_path, [(m, feeds, ["z"])], "73")[0]  # the model as deployed
    assert np.array_equal(np.load(dump / "z.npy"), got["z"])
    r = _cli("diff", str(model), "--scheme", "qnn-htp-v73", "--against", str(dump), "--json", str(tmp_path / "d.json"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    import json
    by = {t["name"]: t["status"] for t in json.loads((tmp_path / "d.json").read_text())["tensors"]}
    assert by["y"] == "unmodelled" and by["z"] == "exact" and by["x_q"] == "exact", by
