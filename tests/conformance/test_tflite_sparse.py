"""Sparse TFLite weights (SparsityParameters + DENSIFY), float32 and float16, vs LiteRT.

Fixtures: tests/fixtures/tflite/sparse_cnn_float{32,16}.tflite (tools/make_sparse_fixtures.py): CSR-sparse
kernels densified by DENSIFY (the float16 file: DENSIFY in float16, then DEQUANTIZE), and Keras's
dynamic-batch Flatten (SHAPE -> STRIDED_SLICE shrink -> PACK -> RESHAPE) on an unknown batch dimension.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from refinterp.loaders.tflite_sparse import densify  # noqa: E402
from tests.conformance.litert_oracle import run_litert  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"


@pytest.mark.parametrize("fixture", ["sparse_cnn_float32.tflite", "sparse_cnn_float16.tflite"])
@pytest.mark.parametrize("resolver,scheme", [("opt", "float32"), ("ref", "tflite-reference"),
                                             ("xnnpack", "tflite-xnnpack")])
@pytest.mark.parametrize("batch", [1, 3])
def test_sparse_model_every_tensor(fixture, resolver, scheme, batch):
    path = FIX / fixture
    g = refinterp.load(str(path))
    assert any(n.source_op == "DENSIFY" for n in g.nodes)
    x = np.random.default_rng(batch).standard_normal((batch, 8, 8, 16)).astype(np.float32)
    want = run_litert(path.read_bytes(), {g.inputs[0]: x}, resolver)
    got = refinterp.Session(g, scheme).run({g.inputs[0]: x}, capture="all")
    compared = 0
    # XNNPACK on a resized input does not keep its intermediate tensors (the delegate computes in its
    # own buffers): there only the model outputs are the runtime's values
    names = g.outputs if resolver == "xnnpack" and batch != 1 else list(want)
    if resolver == "xnnpack":  # nor the weights it densifies / dequantizes itself when it packs them
        weights = {o for n in g.nodes if n.source_op in ("DENSIFY", "DEQUANTIZE") for o in n.outputs}
        names = [n for n in names if n not in weights]
    for name in names:
        w = want[name]
        if name in got and got[name].shape == w.shape and w.dtype.kind in "fi":
            np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5, err_msg=name)
            compared += 1
    assert compared >= (1 if resolver == "xnnpack" and batch != 1 else 5)
    assert got[g.outputs[0]].shape == (batch, 10)


def test_densify_blocked_csr():
    """A 4x4 matrix in 2x2 blocks: dense outer rows, CSR block columns, dense 2x2 inside each block
    (TFLite's block-sparse layout); dense positions not stored are 0."""
    dense = np.zeros((4, 4), np.float32)
    dense[0:2, 2:4] = [[1, 2], [3, 4]]
    dense[2:4, 0:2] = [[5, 6], [7, 8]]
    params = {"order": [0, 1, 2, 3], "block_map": [0, 1],
              "levels": [("dense", 2, None, None), ("csr", 0, np.array([0, 1, 2]), np.array([1, 0])),
                         ("dense", 2, None, None), ("dense", 2, None, None)]}
    values = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.float32)
    assert np.array_equal(densify(values, (4, 4), params, "t", "test"), dense)


def test_densify_rejects_inconsistent_indices():
    from refinterp.errors import ModelError

    params = {"order": [0, 1], "block_map": [],
              "levels": [("dense", 2, None, None), ("csr", 0, np.array([0, 1, 3]), np.array([0, 5, 1]))]}
    with pytest.raises(ModelError, match="outside dimension"):
        densify(np.array([1, 2, 3], np.float32), (2, 2), params, "t", "test")
