"""A requantizing Concat on the HTP: an input on other parameters than the Concat's output.

Measured (onnxruntime-qnn 2.7.0, QNN 2.51, v68 and v73 alike; tests/conformance/test_qnn_htp_concat.py): when a
compute op makes that input, the HTP computes the op a second time directly onto the Concat's parameters (its
requantization folded into the producer: the copy table of the producer's codes differs on up to 99% of them, the
re-run on none) -- 8-bit Sigmoid, Tanh, Gelu and Elu among them.  The same holds through a data movement on its input's own parameters between the two -- a
Transpose or Reshape after a Conv or the SiLU unit, a nearest Resize after a Conv: the producer and the move run a
second time onto the Concat's parameters (per-tensor and per-channel weights with a bias; the copy table misses
83-6,092 codes of 512-8,192 there).  A nearest Resize after the SiLU unit is not characterised: on single-op models
the Concat took the Resize's codes as they are, with no requantization at all (0 off), on a YOLO-style model the
copy table (0 off) -- a condition not found: refused.

Here: a clone of the producer (and of the move) with its output on the Concat's parameters feeds the Concat; the
original output stays for its other readers.  Other producers (Add, AveragePool, other table activations, other data
movement, another Concat), the moves after other producers, bilinear upsampling and Relu-range inputs into a
higher Concat zero point are marked ``htp_concat_unmeasured`` and refused by the Concat kernel
(kernels/qnn_htp/shape.py), as are a graph input's codes (its QuantizeLinear).
"""
from __future__ import annotations

import dataclasses

from ..ir import Node
from .qdq_htp import _HtpFuser, _rerun, _same_quant

# producers the HTP re-runs onto a requantizing Concat's parameters, measured exact (the SiLU unit, _silu_units'
# Swish: 96 random sets, v68 / v73, uint8 / int8; Add and AveragePool re-run too but are 1 code off on a few sets
# where their own output saturates at 0: refused with the others, as is any input on a Relu range into a Concat
# whose zero point is higher, _relu_into_lower), and so is a graph input's QuantizeLinear (off-grid float inputs:
# 20-38 codes in 512 off the copy table, which holds only for inputs already on the input's grid)
CONCAT_FOLDS = ("Conv", "ConvTranspose", "Sub", "Mul", "MaxPool", "Swish")
# 8-bit table activations re-run the same way (after a graph input and after a Conv, also on Relu ranges: 512 jobs
# as deployed, v68 / v73, uint8 / int8, 0 off; an earlier 3-40 codes of 512 off for Sigmoid was not reproduced);
# HardSwish / LeakyRelu are not among them (v73 fuses them into a Conv), nor are 16-bit ones (their outputs are on
# the encodings the QNN EP imposes).  On a Relu range into a Concat whose zero point is higher, the Concat copies
# their codes instead, rounding the exact value half up (160 jobs, Sigmoid / Tanh after a graph input, Sigmoid /
# Gelu after a Conv: 0 off; the re-run 12-504 codes of 512 off, the HTP's QuantizeLinear copy table 0-180): those
# inputs go to the Concat kernel in ``htp_concat_exact_copy``
CONCAT_FOLDS_8BIT = ("Sigmoid", "Tanh", "Gelu", "Elu")

# (move, producer) pairs re-run through a same-parameter move, 8-bit (8 random sets each, v68 / v73, uint8 / int8:
# 0 off; after MaxPool, Mul, Sigmoid or HardSwish neither the re-run nor the codes as they are fit; 16 bits not
# measured)
THROUGH_MOVES = {("Transpose", "Conv"), ("Transpose", "Swish"), ("Reshape", "Conv"), ("Reshape", "Swish"),
                 ("Resize", "Conv")}


def _relu_into_lower(t, oq) -> bool:
    """An input on a Relu range (zero point at its lowest code) into a Concat whose zero point is higher:
    the re-run is floored at 0.0 there and still 1 code off on 12-84 of 512 (measured): not characterised."""
    lowest = _HtpFuser.QRANGE.get(t.dtype, (None,))[0]
    return int(t.quant.zero_point[0]) == lowest and int(oq.zero_point[0]) != lowest


def _copy_move(m: Node, t, tensors: dict) -> bool:
    """``m`` is a one-output Transpose, Reshape or nearest Resize (a bilinear one computes values of its own) whose
    output ``t`` has its input's parameters."""
    if len(m.outputs) != 1 or not m.inputs or m.op not in ("Transpose", "Reshape", "Resize"):
        return False
    if m.op == "Resize" and m.attrs.get("mode", "nearest") not in ("nearest", b"nearest"):
        return False
    x = tensors.get(m.inputs[0])
    return x is not None and x.quant is not None and _same_quant(x.quant, t.quant)


def concat_units(nodes: list[Node], tensors: dict) -> list[Node]:
    producer = {o: n for n in nodes for o in n.outputs}
    out: list[Node] = []
    for n in nodes:
        oq = tensors[n.outputs[0]].quant if n.op == "Concat" and n.outputs and n.outputs[0] in tensors else None
        if oq is None:
            out.append(n)
            continue
        inputs, unmeasured, exact = list(n.inputs), [], []
        for k, name in enumerate(n.inputs):
            t, p = tensors.get(name), producer.get(name)
            if t is None or t.quant is None or t.const is not None or _same_quant(t.quant, oq) or p is None:
                continue
            if t.dtype in ("uint8", "int8") and _copy_move(p, t, tensors) and not _relu_into_lower(t, oq):
                q = producer.get(p.inputs[0])
                if q is not None and (p.op, q.op) in THROUGH_MOVES and len(q.outputs) == 1:
                    out.append(_rerun(q, n.name, oq, tensors))
                    out.append(_rerun(p, n.name, oq, tensors, [out[-1].outputs[0], *p.inputs[1:]]))
                    inputs[k] = out[-1].outputs[0]
                    continue
            table = p.op in CONCAT_FOLDS_8BIT and t.dtype in ("uint8", "int8")
            if table and _relu_into_lower(t, oq):
                exact.append(name)
                continue
            if not (p.op in CONCAT_FOLDS or table) or len(p.outputs) != 1 or _relu_into_lower(t, oq):
                unmeasured.append(name)
                continue
            out.append(_rerun(p, n.name, oq, tensors))
            inputs[k] = out[-1].outputs[0]
        attrs = dict(n.attrs)
        if unmeasured:
            attrs["htp_concat_unmeasured"] = unmeasured
        if exact:
            attrs["htp_concat_exact_copy"] = exact
        out.append(dataclasses.replace(n, inputs=inputs, attrs=attrs))
    return out
