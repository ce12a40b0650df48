"""Integer DIV (int8 / uint8) against LiteRT REF / OPT / XNNPACK and TFLite Micro: every (dividend,
divisor) code pair at random scales and zero points, a broadcast divisor, a fused RELU; every element
exact (TFLite Micro has no uint8 DIV: asserted, and refused under tflite-micro).  A divisor at its zero
point: LiteRT fails the run, refinterp raises an InputError.

Found on the way: quotients whose final shift reaches 32 (dividend 0 or -1 against a large divisor)
come out of gemmlowp's RoundingDivideByPOT as zo + 1 or saturated on x86 (the shift count is taken
modulo 32); refinterp/kernels/tflite/ref/div.py reproduces it.  TFLite Micro forms the multiplier in
double (``impl: float64``): the broadcast case's round scales moved 843 codes with float32.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from refinterp.errors import InputError, UnsupportedOpError  # noqa: E402
from tests.conformance._int_oracle import Aborted, compare, run_batch  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

BACKENDS = {"ref": "tflite-reference", "opt": "tflite-optimized", "xnnpack": "tflite-xnnpack", "tflm": "tflite-micro"}


def _model(dt, s1, z1, s2, z2, so, zo, bshape=(1, 256, 256), act=None):
    b = TFLiteBuilder()
    x = b.tensor("a", (1, 256, 256), dt, scale=s1, zero_point=z1)
    y = b.tensor("b", bshape, dt, scale=s2, zero_point=z2)
    out = b.tensor("y", (1, 256, 256), dt, scale=so, zero_point=zo)
    b.op("DIV", [x, y], [out], options={"fused_activation_function": act} if act else None)
    return b.build([x, y], [out])


def _cases():
    rng = np.random.default_rng(314)
    out = []
    for k in range(8):
        dt = "int8" if k % 2 == 0 else "uint8"
        info = np.iinfo(dt)
        codes = np.arange(int(info.min), int(info.max) + 1)
        s1, s2 = (float(10 ** rng.uniform(-2.5, -0.5)) for _ in range(2))
        so = float(s1 / s2 * 10 ** rng.uniform(-1.5, 0.5) / 20)
        z1, z2, zo = (int(v) for v in rng.integers(int(info.min) + 40, int(info.max) - 40, 3))
        a = np.repeat(codes, 256).reshape(1, 256, 256).astype(dt)
        b = np.tile(codes, 256).reshape(1, 256, 256).astype(dt)
        b[b == z2] = z2 + 1
        act = "RELU" if k == 3 else None
        out.append((f"{dt}-{k}", _model(dt, s1, z1, s2, z2, so, zo, act=act), {"a": a, "b": b}))
    # a broadcast divisor (one row of codes)
    b = np.arange(-128, 128).astype(np.int8).reshape(1, 1, 256)
    b[b == 5] = 6
    out.append(("int8-broadcast", _model("int8", 0.05, 3, 0.02, 5, 0.1, -7, bshape=(1, 1, 256)),
                {"a": np.repeat(np.arange(-128, 128), 256).astype(np.int8).reshape(1, 256, 256), "b": b}))
    return out


CASES = _cases()
_RES: dict = {}


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_div_every_code_pair(backend, tmp_path):
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    if backend not in _RES:
        _RES[backend] = run_batch([(data, feeds) for _, data, feeds in CASES], backend)
    differing = 0
    for (name, data, feeds), r in zip(CASES, _RES[backend]):
        p = tmp_path / f"{name}.tflite"
        p.write_bytes(data)
        g = refinterp.load(p)
        if backend == "tflm" and name.startswith("uint8"):  # a runtime gap, mirrored as a refusal
            assert isinstance(r, Aborted), f"TFLite Micro now runs uint8 DIV ({name}): compare it"
            with pytest.raises(UnsupportedOpError, match="no uint8 DIV"):
                refinterp.Session(g, BACKENDS[backend])
            continue
        assert not isinstance(r, Aborted), f"{name}: {r.message}"
        tensors, diff, notes = compare(r, refinterp.Session(g, BACKENDS[backend]).run(
            dict(zip(g.inputs, feeds.values())), capture="all"))
        assert tensors == 3, notes
        differing += diff
        if diff:
            print(name, notes[:2])
    assert differing == 0


def test_div_by_the_zero_point_fails_like_litert(tmp_path):
    data = _model("int8", 0.05, 0, 0.05, 4, 0.05, 0)
    feeds = {"a": np.ones((1, 256, 256), np.int8), "b": np.full((1, 256, 256), 4, np.int8)}
    r = run_batch([(data, feeds)], "ref")[0]
    assert isinstance(r, Aborted) and "DIV" in r.message
    p = tmp_path / "m.tflite"
    p.write_bytes(data)
    g = refinterp.load(p)
    with pytest.raises(InputError, match="divisor equals its zero point"):
        refinterp.Session(g, "tflite-reference").run(dict(zip(g.inputs, feeds.values())))
