"""com.microsoft MatMulNBits nodes (weight-only 4-/8-bit, kernels/onnxruntime/matmul_nbits.py) against
ONNX Runtime's CPU kernel: packed 4-bit and 8-bit codes, K not a multiple of the block, default /
packed uint8 / float zero points, bias, accuracy levels 0-2 (float32 compute), within 1e-5 relative;
accuracy level 4 (int8 compute, MLAS CompInt8) with block_size 32, 64, 128 and 256, bit for bit;
block_size 16 at level 4 is refused by name."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

import refinterp  # noqa: E402

rng = np.random.default_rng(0)

def _pack4(codes: np.ndarray) -> np.ndarray:
    """Two 4-bit codes per byte, the first in the low nibble (an odd count gets a zero pad)."""
    if codes.shape[1] % 2:
        codes = np.concatenate([codes, np.zeros((codes.shape[0], 1), np.uint8)], 1)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def _model(bits, K, N, block, zp_kind, acc_level, bias):
    """A MatMulNBits node with random codes, scales (and zero points, bias) as the quantizer writes."""
    nb = -(-K // block)
    codes = rng.integers(0, 1 << bits, (N, nb * block)).astype(np.uint8)
    packed = (_pack4(codes) if bits == 4 else codes).reshape(N, nb, -1)
    inits = [numpy_helper.from_array(packed, "B"),
             numpy_helper.from_array(rng.uniform(0.01, 0.05, N * nb).astype(np.float32), "S")]
    ins = ["A", "B", "S", ""]
    if zp_kind == "u8":
        z = rng.integers(0, 1 << bits, (N, nb)).astype(np.uint8)
        inits.append(numpy_helper.from_array((_pack4(z) if bits == 4 else z).reshape(-1), "Z"))
        ins[3] = "Z"
    elif zp_kind == "f32":
        inits.append(numpy_helper.from_array(rng.uniform(0, 1 << bits, N * nb).astype(np.float32), "Z"))
        ins[3] = "Z"
    if bias:
        ins += ["", "bias"]
        inits.append(numpy_helper.from_array(rng.normal(0, 1, N).astype(np.float32), "bias"))
    node = helper.make_node("MatMulNBits", ins, ["Y"], domain="com.microsoft", K=K, N=N, bits=bits,
                            block_size=block, accuracy_level=acc_level)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [3, K])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


CASES = [(4, 64, 16, 32, None, 0, False), (4, 70, 16, 32, "u8", 0, True), (4, 96, 8, 16, "f32", 0, False),
         (8, 64, 16, 32, "u8", 0, False), (4, 64, 16, 32, None, 1, False), (8, 64, 16, 32, None, 2, True),
         (4, 130, 24, 64, "u8", 0, True)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c))
def test_matmul_nbits_matches_onnxruntime(tmp_path, case):
    import onnx

    m = _model(*case)
    a = np.random.default_rng(1).normal(0, 1, (3, case[1])).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["Y"], {"A": a})[0]
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    got = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run({"A": a})["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# accuracy_level 4 (MLAS CompInt8: A quantized to int8 per block), bit for bit: (bits, K, N, zero
# points, bias, M, block) -- K with and without a multiple of 4 blocks and of the block, N with a
# remainder mod 4 (one-column kernels), odd and even M (one- / two-row kernels)
COMPINT8 = [(4, 32, 16, None, False, 1, 32), (4, 70, 7, "u8", True, 3, 32), (4, 200, 30, None, True, 3, 32),
            (4, 512, 16, "u8", False, 2, 32), (8, 64, 16, "u8", False, 3, 32), (8, 128, 30, None, True, 1, 32),
            (8, 200, 7, "u8", True, 3, 32), (4, 300, 30, "u8", True, 3, 128), (4, 512, 16, None, False, 2, 128),
            (8, 1000, 7, "u8", False, 1, 128), (4, 512, 30, "u8", True, 3, 256), (8, 300, 16, None, True, 2, 256),
            (4, 300, 30, "u8", True, 3, 64), (4, 192, 16, None, False, 2, 64), (8, 256, 7, "u8", True, 3, 64)]


@pytest.mark.parametrize("case", COMPINT8, ids=lambda c: "-".join(str(v) for v in c))
def test_accuracy_level_4_bit_exact(tmp_path, case):
    import onnx

    bits, k, n, zp, bias, m_rows, block = case
    m = _model(bits, k, n, block, zp, 4, bias)
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = m_rows
    a = np.random.default_rng(k + n).normal(0, 1, (m_rows, k)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["Y"], {"A": a})[0]
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    got = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run({"A": a})["Y"]
    bad = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
    assert got.shape == want.shape and bad == 0, f"{bad} of {want.size} outputs differ from ORT"
    # the same weights at accuracy_level 0 (float32 compute) give other values: the level matters
    for at in m.graph.node[0].attribute:
        if at.name == "accuracy_level":
            at.i = 0
    f32 = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["Y"], {"A": a})[0]
    assert not np.array_equal(f32, want)


def test_accuracy_level_4_other_block_sizes_are_refused_by_name(tmp_path):
    import onnx

    from refinterp.errors import UnsupportedOpError

    p = tmp_path / "m.onnx"
    onnx.save(_model(4, 128, 16, 16, None, 4, False), str(p))
    with pytest.raises(UnsupportedOpError, match="accuracy_level 4.*block_size=16"):
        refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu")
