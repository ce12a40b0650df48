"""Float Sigmoid / Tanh / Erf / the Gelu family / Pow of the ``onnxruntime-cpu`` scheme (variant
``ort_float``) vs onnxruntime, bit for bit.

MLAS evaluates both with FMA3 rational approximations (kernels/onnxruntime/float_activation.py); NumPy's
transcendentals differ in ~60% of float32 results, enough to flip a 16-bit QuantizeLinear after a
QDQ activation.  Inputs: the clamp regions (|x| beyond 9 / 18), tiny values, signed zeros, and a
dense sweep of normal values.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import refinterp  # noqa: E402
from tests.onnx_models import ort_at_levels  # noqa: E402
from refinterp.kernels.onnxruntime.float_activation import mlas_sigmoid, mlas_tanh  # noqa: E402
from refinterp.kernels.onnxruntime.float_exp import mlas_exp  # noqa: E402


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(8)
    special = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-8, 8.999, 9.0, 9.5, -9.5, 17.99, 18.0, 25.0, -25.0, 1e30,
                        -1e30, 88.72, 88.73, 89.0, -87.4, -87.5, -103.9, -104.0, -200.0, np.inf, -np.inf],
                       np.float32)  # (Exp: the subnormal range below -87.3 and both clamps)
    return np.concatenate([special, (rng.standard_normal(50000) * 6).astype(np.float32),
                           (rng.standard_normal(20000) * 40).astype(np.float32),
                           np.linspace(-20, 20, 20001, dtype=np.float32)])


def _model(op: str, n: int):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _three_ways(tmp_path, m, feeds):
    """(ORT's output, onnxruntime-cpu's, the generic float32 scheme's) for ``m``'s output y."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    ours = np.asarray(refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run(feeds)["y"])
    return want, ours, np.asarray(refinterp.Session(refinterp.load(str(p)), "float32").run(feeds)["y"])


@pytest.mark.parametrize("op,fn", [("Tanh", mlas_tanh), ("Sigmoid", mlas_sigmoid), ("Exp", mlas_exp)])
def test_mlas_activation_bit_exact(op, fn, tmp_path):
    x = _inputs()
    m = _model(op, x.size)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.array_equal(fn(x).view(np.int32), want.view(np.int32))
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    ours = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run({"x": x})["y"]
    assert np.array_equal(ours.view(np.int32), want.view(np.int32))
    generic = refinterp.Session(refinterp.load(str(p)), "float32").run({"x": x})["y"]
    assert not np.array_equal(generic.view(np.int32), want.view(np.int32))  # why the variant exists


def _erf_inputs() -> np.ndarray:
    """Both polynomial branches and their split (0.921875), the 3.925 clamp, signed zeros, NaN and
    infinities, tiny values, and a dense sweep."""
    rng = np.random.default_rng(9)
    special = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-8, 0.921875, np.nextafter(np.float32(0.921875), np.float32(1)),
                        -0.921875, 3.925, 3.93, -3.93, 5.0, 1e30, -1e30, np.inf, -np.inf, np.nan], np.float32)
    return np.concatenate([special, (rng.standard_normal(40000) * 2).astype(np.float32),
                           np.linspace(-5, 5, 20003, dtype=np.float32)])


GELU_FAMILY = {  # name -> (op, domain, attrs, with bias, opset)
    "Erf": ("Erf", "", {}, False, 17),
    "Gelu-none": ("Gelu", "", {}, False, 20),
    "Gelu-tanh": ("Gelu", "", {"approximate": "tanh"}, False, 20),
    "ms.Gelu": ("Gelu", "com.microsoft", {}, False, 17),
    "ms.BiasGelu": ("BiasGelu", "com.microsoft", {}, True, 17),
    "ms.FastGelu": ("FastGelu", "com.microsoft", {}, False, 17),
    "ms.FastGelu-bias": ("FastGelu", "com.microsoft", {}, True, 17),
}


@pytest.mark.parametrize("case", sorted(GELU_FAMILY))
def test_mlas_erf_and_gelu_family_bit_exact(case, tmp_path):
    """ORT's MlasComputeErf (FMA3 kernel) and its Gelu / BiasGelu / FastGelu steps
    (kernels/onnxruntime/float_erf.py), bit for bit; NumPy-order GELU differs."""
    op, domain, attrs, with_bias, opset = GELU_FAMILY[case]
    x = _erf_inputs() if op == "Erf" else _erf_inputs()[17:]  # GELU of inf / NaN: not compared
    x = x[: x.size // 64 * 64].reshape(-1, 64)
    feeds = {"x": x}
    ins = ["x"]
    inits = []
    if with_bias:
        inits = [onnx.numpy_helper.from_array(np.random.default_rng(1).normal(0, 1, 64).astype(np.float32), "b")]
        ins.append("b")
    g = helper.make_graph([helper.make_node(op, ins, ["y"], domain=domain, **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if domain else [])
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 9
    want, ours, generic = _three_ways(tmp_path, m, feeds)
    assert np.array_equal(ours.view(np.int32), want.view(np.int32)), \
        f"{np.mean(ours.view(np.int32) != want.view(np.int32)):.3%} differ"
    assert not np.array_equal(generic.view(np.int32), want.view(np.int32))  # why the variant exists


@pytest.mark.parametrize("with_bias,skip_2d", [(False, False), (True, True)])
def test_skip_simplified_layer_norm_bit_exact(tmp_path, with_bias, skip_2d):
    """com.microsoft.SkipSimplifiedLayerNormalization (the residual add + RMS norm ORT's transformer
    optimizer emits): sequential float32 sums (kernels/onnxruntime/float_layernorm.py); every output
    ONNX Runtime gives is compared."""
    rng = np.random.default_rng(11)
    x = rng.normal(0.3, 2, (3, 37, 768)).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(rng.normal(0, 1, (37, 768) if skip_2d else x.shape).astype(np.float32), "k"),
             onnx.numpy_helper.from_array(rng.normal(1, 0.1, 768).astype(np.float32), "g")]
    ins = ["x", "k", "g"]
    if with_bias:
        inits.append(onnx.numpy_helper.from_array(rng.normal(0, 0.1, 768).astype(np.float32), "b"))
        ins.append("b")
    outs = ["y", "", "inv", "sum"]
    g = helper.make_graph([helper.make_node("SkipSimplifiedLayerNormalization", ins, outs, domain="com.microsoft",
                                            epsilon=1e-6)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    ours = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run({"x": x})
    for name, w in zip(["y", "inv", "sum"], want):
        assert ours[name].shape == w.shape and np.array_equal(ours[name].view(np.int32), w.view(np.int32)), name
    generic = refinterp.Session(refinterp.load(str(p)), "float32").run({"x": x})["y"]
    assert not np.array_equal(generic.view(np.int32), want[0].view(np.int32))


@pytest.mark.parametrize("pattern,opset,sqrt2", [(1, 13, 1.4142135), (2, 13, 1.4142099618911743), (1, 20, 1.4142135),
                                                 (2, 20, 1.4142135)])
def test_erf_gelu_subgraph_fused_as_ort_does(tmp_path, pattern, opset, sqrt2):
    """ORT's GeluFusion turns an exporter's erf GELU (Div by sqrt 2, Erf, Add 1, Mul x, Mul 0.5, in
    either pattern) into one Gelu (com.microsoft below opset 20, ONNX Gelu from 20), which rounds
    differently from the unfused ops: pass ort_gelu_fusion, then the MLAS Gelu steps."""
    rng = np.random.default_rng(pattern + opset)
    x = (rng.standard_normal((16, 257)) * 3).astype(np.float32)
    c = {"s2": np.float32(sqrt2), "one": np.float32(1.0), "half": np.float32(0.5)}
    inits = [onnx.numpy_helper.from_array(np.array(v), k) for k, v in c.items()]
    nodes = [helper.make_node("Div", ["x", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["one", "e"], ["a"])]
    if pattern == 1:
        nodes += [helper.make_node("Mul", ["half", "x"], ["h"]), helper.make_node("Mul", ["a", "h"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    want = ort_at_levels(m, {"x": x})
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    ours = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run({"x": x})["y"]
    assert np.array_equal(ours.view(np.int32), want["ORT_ENABLE_ALL"].view(np.int32)), \
        f"{np.mean(ours.view(np.int32) != want['ORT_ENABLE_ALL'].view(np.int32)):.3%} differ"
    assert not np.array_equal(want["ORT_DISABLE_ALL"].view(np.int32), want["ORT_ENABLE_ALL"].view(np.int32))


POW_CASES = {  # name -> (exponent value, exponent dtype); a base of 60k values incl. negatives, zeros
    "square": (2.0, np.float32), "cube": (3.0, np.float32), "sqrt": (0.5, np.float32),
    "one-and-half": (1.5, np.float32), "reciprocal": (-1.0, np.float32), "fourth": (4.0, np.float32),
    "cube-int64": (3, np.int64), "fifth-int64": (5, np.int64), "third-double": (1 / 3, np.float64),
    "elementwise": (None, np.float32),
}


@pytest.mark.parametrize("case", sorted(POW_CASES))
def test_ort_pow_bit_exact(case, tmp_path):
    """ORT's Pow (kernels/onnxruntime/float_pow.py): x*x / x*x*x shortcuts for a single exponent of 2 or
    3 (any type), libm powf for float32 exponents, double pow for others -- bit for bit, NaNs where ORT
    has them; NumPy's float32 power (what the generic kernel ends in) differs."""
    value, dtype = POW_CASES[case]
    rng = np.random.default_rng(12)
    x = np.concatenate([np.array([0.0, -0.0, 1.0, -1.0, 1e-30, 3e38, -2.0], np.float32),
                        (rng.standard_normal(60000) * 3).astype(np.float32)])
    if value is None:
        e = rng.uniform(-3, 3, x.size).astype(np.float32)
        inputs = [helper.make_tensor_value_info("e", TensorProto.FLOAT, [x.size])]
        feeds, inits = {"x": x, "e": e}, []
    else:
        inputs, feeds = [], {"x": x}
        inits = [onnx.numpy_helper.from_array(np.array(value, dtype), "e")]
    g = helper.make_graph([helper.make_node("Pow", ["x", "e"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])] + inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    want, ours, generic = _three_ways(tmp_path, m, feeds)
    assert np.array_equal(ours.view(np.int32), want.view(np.int32)), int((ours.view(np.int32) != want.view(np.int32)).sum())
    if dtype == np.float32 and case != "square":  # (x**2 is x*x there too; other exponent types widen)
        assert not np.array_equal(generic.view(np.int32), want.view(np.int32))


@pytest.mark.parametrize("n", [7, 4001, 16001, 50001, 262147])
def test_ort_log_bit_exact(n, tmp_path):
    """ORT's Log (kernels/onnxruntime/float_log.py): Eigen's SSE packet log, and libm's logf for the
    elements before the first aligned packet and after the last whole one of each of ORT's parallel-for
    blocks (the sizes cover one block, a short tail, and 6 / 8 blocks); zeros, infinities, negatives,
    NaN and subnormals included, NaN bit patterns too.  NumPy's float32 log differs on ~11%."""
    rng = np.random.default_rng(n)
    special = np.array([0.0, -0.0, np.inf, -np.inf, -1.0, np.nan, 1e-40, 1.0, 0.70710677, 0.70710683], np.float32)
    x = np.concatenate([special, (np.abs(rng.standard_normal(n)) * 10 + 1e-3).astype(np.float32)])[:max(n, 7)]
    m = _model("Log", x.size)
    want, ours, generic = _three_ways(tmp_path, m, {"x": x})
    assert np.array_equal(ours.view(np.int32), want.view(np.int32)), np.nonzero(ours.view(np.int32) != want.view(np.int32))
    if n > 100:
        assert not np.array_equal(generic.view(np.int32), want.view(np.int32))


@pytest.mark.parametrize("n", [7, 50001, 262147])
@pytest.mark.parametrize("op,attrs", [("Elu", {}), ("Elu", {"alpha": 0.3}), ("Selu", {}), ("Celu", {"alpha": 1.7}),
                                      ("Softsign", {}), ("Softplus", {}), ("Mish", {})])
def test_ort_eigen_activations_bit_exact(op, attrs, n, tmp_path):
    """ORT's Elu / Selu / Celu / Softsign / Softplus functors and Mish (its function body) (kernels/onnxruntime/float_eigen_unary.py):
    Eigen's SSE pexp_float (and plog1p) packets and libm's expf (log1pf) at the edges of ORT's
    parallel-for blocks (one block, 8 and more), exp's clamps, subnormal range, infinities and NaN;
    NumPy's exp differs."""
    rng = np.random.default_rng(n)
    special = np.array([0, -0.0, -104.5, -103, -88, -87.5, 88.7, 89, np.inf, -np.inf, np.nan], np.float32)
    x = np.concatenate([special, (rng.standard_normal(n) * 6).astype(np.float32)])[:max(n, special.size)]
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    want, ours, generic = _three_ways(tmp_path, m, {"x": x})
    assert np.array_equal(ours.view(np.int32), want.view(np.int32)), np.nonzero(ours.view(np.int32) != want.view(np.int32))
    if n > 100:
        assert not np.array_equal(generic.view(np.int32), want.view(np.int32))


TRIG_RANGES = {"Sin": 100.0, "Cos": 100.0, "Asin": 1.2, "Acos": 1.2, "Atan": 5.0, "Tan": 3.0, "Sinh": 90.0, "Cosh": 90.0,
               "Asinh": 1e5, "Acosh": 100.0, "Atanh": 1.1}


@pytest.mark.parametrize("n", [7, 20003])
@pytest.mark.parametrize("op", sorted(TRIG_RANGES))
def test_ort_trig_bit_exact(op, n, tmp_path):
    """ORT's trigonometric ops (kernels/onnxruntime/float_trig.py): Sin / Cos / Asin / Acos / Atan as Eigen's
    SSE packets with libm for the N mod 4 tail (Sin / Cos incl. the Payne-Hanek reduction of huge
    arguments), Tan / Sinh / Cosh / Asinh / Acosh / Atanh as libm's float functions -- out-of-domain
    values, signed zeros, infinities and NaN included; the generic kernel differs."""
    rng = np.random.default_rng(n)
    r = TRIG_RANGES[op]
    special = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, 25966.0, 18838.0, 3e38, -1e30], np.float32)
    x = np.concatenate([special, rng.uniform(-r, r, n).astype(np.float32),
                        (rng.uniform(-1, 1, n // 4) * 10.0 ** rng.uniform(4, 38, n // 4)).astype(np.float32)])[:max(n, 7)]
    want, ours, generic = _three_ways(tmp_path, _model(op, x.size), {"x": x})
    assert np.array_equal(ours.view(np.int32), want.view(np.int32)), np.nonzero(ours.view(np.int32) != want.view(np.int32))
    if n > 100:
        assert not np.array_equal(generic.view(np.int32), want.view(np.int32))
