"""TFLite integer loose ends vs LiteRT BUILTIN_REF (scheme tflite-reference) and tflite-micro
(scheme tflite-micro), 0 differing elements:

* MUL real multiplier precision: LiteRT computes float32(s1*s2/so), TFLM double(s1)*double(s2)/double(so)
  (Mul ``impl`` float32_multiplier / float64_multiplier).  Inputs are chosen where the two multipliers
  give different outputs, and each case also checks that the *other* scheme's formula misses the oracle.
* CONCATENATION with unequal quantization params: int8 refused (both runtimes fail in Prepare;
  refinterp raises ModelError at Session build), int16 zero points must be 0 and codes are copied
  whatever the scales, uint8 rescales (LiteRT only: TFLM has no uint8 CONCATENATION).
* Data-movement ops whose input and output params differ: codes copied, output params ignored
  (refinterp/kernels/int/shape_quant.py); LiteRT EXPAND_DIMS / PACK / UNPACK / MIRROR_PAD refuse in Prepare while
  TFLM copies.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from refinterp.errors import ModelError  # noqa: E402
from refinterp.quant import Rounding, requantize  # noqa: E402
from refinterp.quant.fixedpoint import quantize_multiplier  # noqa: E402
from tests.conformance._qcases import Aborted, binary, compare, rand, run_batch, run_ours  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

F = np.float32
I32 = np.int32
SCHEMES = {"ref": "tflite-reference", "tflm": "tflite-micro"}
OTHER = {"ref": "tflite-micro", "tflm": "tflite-reference"}
QI, QO = (0.05, 3), (0.11, -7)          # unequal int8 params for the data-movement cases
QI16, QO16 = (0.05, 0), (0.11, 0)


# -- MUL -----------------------------------------------------------------------------------------

def _mul_case(seed: int, dtype: str):
    """Scales whose float32 and float64 real multipliers differ, and up to 64 code pairs on which the
    two resulting requantizations disagree (zero points 0: int16 MUL requires them)."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    for _ in range(400):
        s1, s2 = F(10 ** rng.uniform(-5, -2)), F(10 ** rng.uniform(-5, -2))
        # int8: real multiplier 1/126..1/32 keeps the 256x256 products mostly unsaturated
        so = F(s1 * s2 * F(10 ** rng.uniform(0.5, 3.5) if dtype == "int16" else 10 ** rng.uniform(1.5, 2.1)))
        m32 = quantize_multiplier(float(F(F(s1 * s2) / so)))
        m64 = quantize_multiplier(float(s1) * float(s2) / float(so))
        if m32 == m64:
            continue
        if dtype == "int8":
            g = np.stack(np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)), -1).reshape(-1, 2)
            a, b = g[:, 0], g[:, 1]
        else:
            a, b = (rng.integers(info.min, info.max + 1, 1_000_000) for _ in range(2))
        p = a.astype(np.int64) * b
        o32 = np.clip(requantize(p, *m32, Rounding.DOUBLE), info.min, info.max)
        o64 = np.clip(requantize(p, *m64, Rounding.DOUBLE), info.min, info.max)
        k = np.flatnonzero(o32 != o64)[:64]
        if k.size:
            return binary("MUL", dtype, (float(s1), 0), (float(s2), 0), (float(so), 0),
                          a[k].reshape(1, -1), b[k].reshape(1, -1))
    raise AssertionError("no discriminating MUL case found")


MUL_CASES = {f"mul-{dt}-{seed}": (dt, seed) for seed in (1, 2, 3) for dt in ("int8", "int16")}


# -- CONCATENATION -------------------------------------------------------------------------------

def _concat(dtype: str, qa, qb, qo, seed: int = 0):
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    x = b.tensor("a", [1, 2, 3, 4], dtype, *qa)
    y = b.tensor("b", [1, 2, 3, 5], dtype, *qb)
    o = b.tensor("y", [1, 2, 3, 9], dtype, *qo)
    b.op("CONCATENATION", [x, y], [o], options={"axis": 3})
    return b.build([x, y], [o]), {"a": rand(rng, (1, 2, 3, 4), dtype), "b": rand(rng, (1, 2, 3, 5), dtype)}


# expectation per backend: "match" (0 differences) or "refuse" (runtime fails, refinterp ModelError)
CONCAT = {
    "concat-int8-equal": (lambda: _concat("int8", (0.1, 3), (0.1, 3), (0.1, 3)), {"ref": "match", "tflm": "match"}),
    "concat-int8-scale": (lambda: _concat("int8", (0.1, 3), (0.2, 3), (0.1, 3)), {"ref": "refuse", "tflm": "refuse"}),
    "concat-int8-zp": (lambda: _concat("int8", (0.1, 3), (0.1, 4), (0.1, 3)), {"ref": "refuse", "tflm": "refuse"}),
    "concat-int8-out": (lambda: _concat("int8", (0.1, 3), (0.1, 3), (0.1, 5)), {"ref": "refuse", "tflm": "refuse"}),
    "concat-int16-scales": (lambda: _concat("int16", (0.1, 0), (0.2, 0), (0.3, 0)), {"ref": "match", "tflm": "match"}),
    "concat-int16-zp": (lambda: _concat("int16", (0.1, 0), (0.1, 2), (0.1, 0)), {"ref": "refuse", "tflm": "refuse"}),
    "concat-uint8-rescale": (lambda: _concat("uint8", (0.1, 128), (0.07, 100), (0.15, 120)), {"ref": "match"}),
}


# -- data movement with unequal params -----------------------------------------------------------

def _move(op: str, xshape, oshapes, consts=(), options=None, nin=1, dtype="int8", lead=None):
    rng = np.random.default_rng(len(op))
    qi, qo = (QI16, QO16) if dtype == "int16" else (QI, QO)
    b = TFLiteBuilder()
    ins, feeds = [], {}
    if lead is not None:  # SPLIT: the axis comes first
        ins.append(b.const("axis", lead))
    for i in range(nin):
        ins.append(b.tensor(f"x{i}", xshape, dtype, *qi))
        feeds[f"x{i}"] = rand(rng, xshape, dtype)
    for k, c in enumerate(consts):
        ins.append(b.const(f"c{k}", c[0], dtype, *qo) if isinstance(c, tuple) else b.const(f"c{k}", c))
    outs = [b.tensor(f"y{j}", s, dtype, *qo) for j, s in enumerate(oshapes)]
    b.op(op, ins, outs, options=options)
    return b.build([i for i in ins if b.tensors[i].buffer == 0], outs), feeds


PADS = np.array([[0, 0], [1, 1], [0, 1], [0, 0]], I32)
BOTH_MATCH = {"ref": "match", "tflm": "match"}
LITERT_REFUSES = {"ref": "refuse", "tflm": "match"}
MOVE = {
    "reshape": (lambda: _move("RESHAPE", [1, 4, 6], [[4, 6]], [np.array([4, 6], I32)]), BOTH_MATCH),
    "transpose": (lambda: _move("TRANSPOSE", [2, 3, 4], [[4, 2, 3]], [np.array([2, 0, 1], I32)]), BOTH_MATCH),
    "squeeze": (lambda: _move("SQUEEZE", [1, 4, 1, 6], [[4, 6]], options={"squeeze_dims": [0, 2]}), BOTH_MATCH),
    "slice": (lambda: _move("SLICE", [3, 5, 6], [[2, 3, 4]], [np.array([1, 1, 2], I32), np.array([2, 3, 4], I32)]),
              BOTH_MATCH),
    "strided-slice": (lambda: _move("STRIDED_SLICE", [4, 6, 5], [[2, 3, 5]],
                                    [np.array([0, 0, 0], I32), np.array([4, 6, 5], I32), np.array([2, 2, 1], I32)]),
                      BOTH_MATCH),
    "gather": (lambda: _move("GATHER", [5, 6], [[3, 6]], [np.array([4, 0, 2], I32)]), BOTH_MATCH),
    "pad": (lambda: _move("PAD", [1, 3, 4, 2], [[1, 5, 5, 2]], [PADS]), BOTH_MATCH),
    "padv2": (lambda: _move("PADV2", [1, 3, 4, 2], [[1, 5, 5, 2]], [PADS, (np.array([5]),)]), BOTH_MATCH),
    "depth-to-space": (lambda: _move("DEPTH_TO_SPACE", [1, 2, 3, 8], [[1, 4, 6, 2]], options={"block_size": 2}),
                       BOTH_MATCH),
    "space-to-depth": (lambda: _move("SPACE_TO_DEPTH", [1, 4, 6, 2], [[1, 2, 3, 8]], options={"block_size": 2}),
                       BOTH_MATCH),
    "split": (lambda: _move("SPLIT", [2, 6], [[2, 3], [2, 3]], lead=np.array(1, I32)), BOTH_MATCH),
    "split-v": (lambda: _move("SPLIT_V", [2, 6], [[2, 2], [2, 4]], [np.array([2, 4], I32), np.array(1, I32)]),
                BOTH_MATCH),
    "tile": (lambda: _move("TILE", [2, 3], [[4, 3]], [np.array([2, 1], I32)]), {"ref": "match"}),  # no int8 TILE in TFLM
    "reshape-int16": (lambda: _move("RESHAPE", [1, 4, 6], [[4, 6]], [np.array([4, 6], I32)], dtype="int16"),
                      BOTH_MATCH),
    "transpose-int16": (lambda: _move("TRANSPOSE", [2, 3, 4], [[4, 2, 3]], [np.array([2, 0, 1], I32)],
                                      dtype="int16"), BOTH_MATCH),
    "expand-dims": (lambda: _move("EXPAND_DIMS", [4, 6], [[4, 1, 6]], [np.array([1], I32)]), LITERT_REFUSES),
    "mirror-pad": (lambda: _move("MIRROR_PAD", [1, 3, 4, 2], [[1, 5, 6, 2]],
                                 [np.array([[0, 0], [1, 1], [1, 1], [0, 0]], I32)], options={"mode": "REFLECT"}),
                   LITERT_REFUSES),
    "pack": (lambda: _move("PACK", [2, 3], [[2, 2, 3]], nin=2, options={"axis": 0}), LITERT_REFUSES),
    "unpack": (lambda: _move("UNPACK", [2, 3], [[3], [3]], options={"axis": 0}), LITERT_REFUSES),
}


@lru_cache(maxsize=None)
def _models() -> dict[str, tuple[bytes, dict, dict]]:
    out = {cid: (*_mul_case(seed, dt), BOTH_MATCH) for cid, (dt, seed) in MUL_CASES.items()}
    for table in (CONCAT, MOVE):
        out.update({cid: (*make(), expect) for cid, (make, expect) in table.items()})
    return out


@lru_cache(maxsize=None)
def _oracle(backend: str) -> dict[str, object]:
    todo = [(cid, m) for cid, m in _models().items() if backend in m[2]]
    return dict(zip([c for c, _ in todo], run_batch([(m[0], m[1]) for _, m in todo], backend)))


PARAMS = [(cid, be) for table in (MUL_CASES, CONCAT, MOVE) for cid in table
          for be in (("ref", "tflm") if table is MUL_CASES else table[cid][1])]


@pytest.mark.parametrize("case_id,backend", PARAMS, ids=[f"{c}[{b}]" for c, b in PARAMS])
def test_loose_end_matches_oracle(case_id, backend):
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    model, feeds, expect = _models()[case_id]
    oracle = _oracle(backend)[case_id]
    if expect[backend] == "refuse":
        assert isinstance(oracle, Aborted), f"{backend} ran the model; refinterp should not refuse it"
        assert "prepare" in oracle.message or "allocate" in oracle.message, oracle.message
        with pytest.raises(ModelError) as err:
            run_ours(model, feeds, SCHEMES[backend])
        msg = str(err.value)
        assert "\n" not in msg and "node 'y" in msg and "scale" in msg and "zero point" in msg, msg
        return
    assert not isinstance(oracle, Aborted), oracle.message
    tensors, diff, notes = compare(oracle, run_ours(model, feeds, SCHEMES[backend]))
    assert tensors >= 2 and diff == 0, notes
    if case_id in MUL_CASES:  # the case separates the two multiplier formulas
        _, other_diff, _ = compare(oracle, run_ours(model, feeds, OTHER[backend]))
        assert other_diff > 0


def test_requires_equal_params_is_validated_as_a_boolean():
    from refinterp.errors import SchemeError
    from refinterp.schemes import schema

    schema.validate({"name": "x", "ops": {"Pack": {"requires_equal_params": True}}}, "x.yaml")
    with pytest.raises(SchemeError, match="requires_equal_params"):
        schema.validate({"name": "x", "ops": {"Pack": {"requires_equal_params": "yes"}}}, "x.yaml")
