"""The second operand of an HTP MatMul of two 8-bit activations, made by a compute op near the middle zero point.

Measured (onnxruntime-qnn 2.7.0, QNN 2.51; kernels/qnn_htp/matmul_act.py has the evidence): when B is made by a
compute op (through same-parameter copies) and its zero point lies within 16 codes of the middle of its type (uint8
112 .. 144, int8 -16 .. 16), the HTP does not read B's stored codes: its producer computes B a second time onto
symmetric int8 -- B's scale, zero point at the middle, clamped to [-128, 127] around it -- and the MatMul reads
that.  Further from the middle, and from a graph input at any zero point, the stored codes are read (and columns
past int8 re-quantized, as for weights).  Here such a B becomes a clone of its producer (and of the copies after
it) on B's scale with the middle zero point; the stored tensor stays for B's other readers and for ``capture``.
"""
from __future__ import annotations

import dataclasses

from ..ir import Node, QuantParams
from ..quant import htp_weights
from .qdq_htp import _producer_kind, _rerun, copies_back

# producers the HTP runs a second time onto symmetric int8 for such a B (measured, v68 and v73: the re-run 0 codes
# off; Conv, Mul, Sigmoid, Tanh, Relu, Gelu and HardSwish are read as stored there: kernels/qnn_htp/matmul_act.py)
RERUN = ("Add", "Sub", "MatMul")


def near_middle(t) -> bool:
    """A per-tensor 8-bit tensor whose zero point is within ``WINDOW`` of its type's middle (not at it)."""
    return (t is not None and t.quant is not None and t.quant.per_tensor
            and htp_weights.near_middle(t.dtype, int(t.quant.zero_point.ravel()[0])))


def _chain(name: str, producer: dict, tensors: dict) -> list[Node]:
    """The nodes that made ``name``'s codes: the op that computed them, then the copies after it; [] when the
    codes come from a graph input's QuantizeLinear or no producer."""
    p, copies = copies_back(name, producer, tensors)
    if _producer_kind(p, tensors) == "input" or len(p.outputs) != 1:
        return []
    return [p] + copies


def symmetric_operands(nodes: list[Node], tensors: dict, rerun: tuple[str, ...]) -> list[Node]:
    """Each MatMul of two activations whose B is ``near_middle`` and made by an op in ``rerun`` reads a clone of
    that op and its copies onto B's scale and the middle zero point (attribute ``htp_b_symmetric`` = the op)."""
    producer = {o: n for n in nodes for o in n.outputs}
    out: list[Node] = []
    made: set[str] = set()
    for n in nodes:
        b = n.inputs[1] if n.op == "MatMul" and len(n.inputs) > 1 else None
        t = tensors.get(b) if b is not None else None
        chain = _chain(b, producer, tensors) if near_middle(t) and "htp_operands_from" in n.attrs else []
        if not chain or chain[0].op not in rerun:
            out.append(n)
            continue
        q = QuantParams(t.quant.scale.copy(), htp_weights.MIDDLE[t.dtype])
        prev = None
        for p in chain:
            new = f"{p.outputs[0]}::htp_int8"
            if new not in made:
                out.append(_rerun(p, "htp_int8", q, tensors, None if prev is None else [prev, *p.inputs[1:]]))
                made.add(new)
            prev = new
        out.append(dataclasses.replace(n, inputs=[n.inputs[0], prev, *n.inputs[2:]],
                                       attrs=dict(n.attrs, htp_b_symmetric=chain[0].op)))
    return out
