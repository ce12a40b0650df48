"""ONNX Runtime's level-2 MatMul fusions into com.microsoft.FusedMatMul (ORT_ENABLE_EXTENDED and up),
for float32 MatMuls outside QDQ units; the kernel is kernels/onnxruntime/float_fused_matmul.py.

``ort_matmul_transpose_fusion`` (matmul_transpose_fusion.cc): a MatMul (or FusedMatMul) input made
by a Transpose that is not a graph output is read untransposed when the Transpose leaves the last
axis in one of the last two places and (rank >= 3) keeps the batch axes in order with axis 0 first
or just behind them (no perm = reversed axes): transA / transB set when the last two axes swap,
transBatchA / transBatchB when axis 0 moved behind the batch axes (then both operands must have one
known rank), each toggled on a FusedMatMul, whose alpha is kept; not into an operand a FusedMatMul
already batch-transposes, nor when both operands are one tensor.  The Transpose goes once every consumer was fused.  ORT's
Cast-between variant (Transpose -> Cast -> MatMul, the two swapped) is not reproduced: such graphs
stay unfused here.

``ort_matmul_scale_fusion`` (matmul_scale_fusion.cc), after it: a Mul by a scalar constant (either
input) or a Div by one (the divisor) feeding a MatMul / FusedMatMul input -- the other Mul input of
known, non-zero rank -- or taking its only output (not a graph output), folds into alpha.  A
constant is a scalar when it has one element and no more axes than the other operand.  alpha is
accumulated in float32 in ORT's order: the node's alpha (or 1), times each input scale (producers in
graph order), times the output scale; a Div contributes f32(1 / f32(divisor)).  An input Mul / Div
is removed only when nothing else reads it.

ORT folds constant subgraphs first (level 1), so an exporter's scale computed from constants --
``Pow(32, 0.5)`` or ``Sqrt`` of a constant, for a head size -- is a constant here too: evaluated in
float32 as ORT's CPU kernels compute it (numpy's float32 ops call the same libm), and the nodes
computing it dropped once unused.  Measured with onnxruntime 1.32.0
(tests/conformance/test_ort_float_matmul_fusions.py).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from .rewrite import splice

_MS_FUSED = "com.microsoft.FusedMatMul"
_F32 = np.float32
# ops ORT's constant folding evaluates that exporters use to build an attention scale
_FOLDABLE = {"Pow", "Sqrt", "Div", "Mul", "Add", "Sub", "Reciprocal", "Identity", "Cast", "Constant"}


def _float32(graph: Graph, name: str) -> bool:
    t = graph.tensors.get(name)
    return t is not None and t.dtype == "float32" and t.quant is None


def _rank(graph: Graph, name: str) -> int | None:
    t = graph.tensors.get(name)
    return None if t is None or t.shape is None else len(t.shape)


def _is_matmul(n: Node) -> bool:
    return (n.op == "MatMul" and len(n.inputs) == 2 and not n.attrs) or n.op == _MS_FUSED


def _matmul_attrs(n: Node) -> tuple[bool, bool, float]:
    if n.op == _MS_FUSED:
        return bool(int(n.attr("transA", 0))), bool(int(n.attr("transB", 0))), float(_F32(n.attr("alpha", 1.0)))
    return False, False, 1.0


def _fused(n: Node, inputs: list[str], outputs: list[str], ta: bool, tb: bool, alpha: float, how: str) -> Node:
    attrs = dict(n.attrs) if n.op == _MS_FUSED else {}
    attrs.update({"transA": int(ta), "transB": int(tb), "alpha": float(_F32(alpha))})
    src = n.source_op or n.op
    return Node(name=n.name, op=_MS_FUSED, inputs=inputs, outputs=outputs, attrs=attrs,
                source_op=f"{src}+{how}" if how not in src else src, index=n.index)


# -- MatmulTransposeFusion ---------------------------------------------------------------------------------

def _transpose_kind(graph: Graph, t: Node) -> tuple[bool, bool] | None:
    """(transpose, transpose-batch) when ORT's GetTransposeNodeFromOutput fuses this Transpose into a
    MatMul input, else None: the last axis ends in one of the last two places, and (rank >= 3) axis 0
    stays first or becomes the second of the batch axes while the batch axes keep their order."""
    perm = t.attr("perm")
    if perm is None:
        r = _rank(graph, t.inputs[0])
        if r is None:
            return None
        perm = list(range(r))[::-1]
    perm = [int(p) for p in perm]
    r = len(perm)
    if r < 2 or r - 1 not in perm[r - 2:]:
        return None
    if r >= 3 and (perm[0] not in (0, 1) or any(perm[i] + 1 != perm[i + 1] for i in range(r - 3))):
        return None
    return perm[r - 2] == r - 1, r >= 3 and perm[0] == 1


def ort_matmul_transpose_fusion(graph: Graph) -> Graph:
    """Repeated until nothing fuses, as ORT's transformer loop does (Transpose -> Transpose -> MatMul fuses
    both: the second pass toggles the flags back)."""
    for _ in range(10):  # ORT's graph-transformer step limit
        out = _transpose_fusion_once(graph)
        if out is graph:
            return graph
        graph = out
    return graph


def _transpose_fusion_once(graph: Graph) -> Graph:
    producer = graph.producer()
    consumers = graph.consumers()
    left: dict[str, int] = {}  # Transpose output -> consumers not yet fused
    replace: dict[str, list[Node]] = {}
    drop: set[str] = set()
    for n in graph.nodes:
        if not _is_matmul(n) or not all(_float32(graph, i) for i in n.inputs[:2]) or n.inputs[0] == n.inputs[1]:
            continue
        ins, found = list(n.inputs[:2]), [None, None]
        for j in range(2):
            t = producer.get(ins[j])
            if n.op == _MS_FUSED and int(n.attr("transBatchA" if j == 0 else "transBatchB", 0)):
                continue  # ORT does not fuse into an operand already batch-transposed
            if t is None or t.op != "Transpose" or t.outputs[0] in graph.outputs:
                continue
            found[j] = _transpose_kind(graph, t)
        if any(k is not None and k[1] for k in found):  # batch-transposed: both operands of one known rank
            r0, r1 = _rank(graph, ins[0]), _rank(graph, ins[1])
            if r0 is None or r0 != r1:
                found = [None if k is not None and k[1] else k for k in found]
        if not any(k is not None for k in found):
            continue
        flips, batch = [False, False], [False, False]
        for j in range(2):
            if found[j] is None:
                continue
            t = producer[ins[j]]
            out = t.outputs[0]
            left[out] = left.get(out, len(consumers.get(out, []))) - 1
            if left[out] == 0:
                drop.add(t.name)
            ins[j] = t.inputs[0]
            flips[j], batch[j] = found[j]
        ta, tb, alpha = _matmul_attrs(n)
        fused = _fused(n, ins, list(n.outputs), ta ^ flips[0], tb ^ flips[1], alpha, "Transpose (MatmulTransposeFusion)")
        if any(batch):
            fused.attrs["transBatchA"] = int(n.attr("transBatchA", 0) or 0) ^ int(batch[0])
            fused.attrs["transBatchB"] = int(n.attr("transBatchB", 0) or 0) ^ int(batch[1])
        replace[n.name] = [fused]
    return splice(graph, replace, drop)


# -- MatMulScaleFusion -------------------------------------------------------------------------------------

def _const_value(graph: Graph, producer: dict, name: str, depth: int = 0):
    """The value of ``name`` when it is a constant or ORT would constant-fold it (module docstring)."""
    t = graph.tensors.get(name)
    if t is not None and t.const is not None:
        return np.asarray(t.const)
    p = producer.get(name)
    if p is None or depth > 8 or p.op not in _FOLDABLE or len(p.outputs) != 1:
        return None
    vals = [_const_value(graph, producer, i, depth + 1) for i in p.inputs if i]
    if any(v is None for v in vals) or (p.op != "Constant" and not vals):
        return None
    if any(v.dtype != np.float32 for v in vals) and p.op != "Cast":
        return None
    with np.errstate(all="ignore"):
        if p.op == "Pow":
            return np.power(vals[0], vals[1]).astype(_F32)
        if p.op == "Sqrt":
            return np.sqrt(vals[0]).astype(_F32)
        if p.op in ("Div", "Mul", "Add", "Sub"):
            f = {"Div": np.divide, "Mul": np.multiply, "Add": np.add, "Sub": np.subtract}[p.op]
            return f(vals[0], vals[1]).astype(_F32)
        if p.op == "Reciprocal":
            return (_F32(1) / vals[0]).astype(_F32)
        if p.op == "Identity":
            return vals[0]
        if p.op == "Cast" and t is not None and t.dtype == "float32":
            return vals[0].astype(_F32)
    return None


def _scalar(graph: Graph, producer: dict, name: str, max_rank: int | None):
    v = _const_value(graph, producer, name)
    if v is None or v.size != 1 or v.dtype not in (np.float32, np.float64, np.float16) or \
            v.ndim > (max_rank or 0):
        return None
    return v.reshape(())


def _scale_of(graph: Graph, producer: dict, s: Node) -> tuple[float, int] | None:
    """(scale, index of the scaled operand) of a Mul / Div by a scalar constant."""
    if len(s.inputs) != 2 or len(s.outputs) != 1:
        return None
    if s.op == "Div":
        d = _scalar(graph, producer, s.inputs[1], _rank(graph, s.inputs[0]))
        return None if d is None else (float(_F32(1.0) / _F32(d)), 0)
    if s.op == "Mul":
        for j in range(2):
            v = _scalar(graph, producer, s.inputs[j], _rank(graph, s.inputs[1 - j]))
            if v is not None:
                return float(_F32(v)), 1 - j
    return None


def _dead_producers(graph: Graph, producer: dict, consumers: dict, start: list[str], dropped: set[str]) -> None:
    """Adds to ``dropped`` the constant-only producers of ``start`` that nothing else reads any more."""
    stack = list(start)
    while stack:
        p = producer.get(stack.pop())
        if p is None or p.name in dropped or p.op not in _FOLDABLE or any(o in graph.outputs for o in p.outputs) \
                or _const_value(graph, producer, p.outputs[0]) is None:
            continue
        if any(c.name not in dropped for o in p.outputs for c in consumers.get(o, [])):
            continue
        dropped.add(p.name)
        stack.extend(i for i in p.inputs if i)


def ort_matmul_scale_fusion(graph: Graph) -> Graph:
    producer = graph.producer()
    consumers = graph.consumers()
    replace: dict[str, list[Node]] = {}
    drop: set[str] = set()
    for n in graph.nodes:
        if not _is_matmul(n) or not all(_float32(graph, i) for i in n.inputs[:2]):
            continue
        ins, outs = list(n.inputs[:2]), list(n.outputs)
        merged_in: list[tuple[int, Node, float, int]] = []
        for j in range(2):
            p = producer.get(ins[j])
            if p is None or p.name in drop or p.op not in ("Mul", "Div"):
                continue
            sc = _scale_of(graph, producer, p)
            if sc is None or not _rank(graph, p.inputs[sc[1]]):
                continue
            merged_in.append((p.index, p, sc[0], j))
        merged_out = None
        users = consumers.get(outs[0], [])
        if len(users) == 1 and outs[0] not in graph.outputs and users[0].op in ("Mul", "Div"):
            sc = _scale_of(graph, producer, users[0])
            if sc is not None and users[0].inputs[sc[1]] == outs[0]:
                merged_out = (users[0], sc[0])
        if not merged_in and merged_out is None:
            continue
        ta, tb, alpha = _matmul_attrs(n)
        total = _F32(alpha)
        for _, p, s, j in sorted(merged_in, key=lambda m: (m[0], m[3])):
            total = _F32(total * _F32(s))
            ins[j] = p.inputs[_scale_of(graph, producer, p)[1]]
        scale_inputs = []
        for _, p, _, j in merged_in:
            rest = [c for c in consumers.get(p.outputs[0], []) if c.name != n.name and c.name not in drop]
            if not rest and p.outputs[0] not in graph.outputs:
                drop.add(p.name)
                scale_inputs.append(p.inputs[1 - _scale_of(graph, producer, p)[1]])
        if merged_out is not None:
            total = _F32(total * _F32(merged_out[1]))
            outs = list(merged_out[0].outputs)
            drop.add(merged_out[0].name)
            scale_inputs.append(merged_out[0].inputs[1 - _scale_of(graph, producer, merged_out[0])[1]])
            producer[outs[0]] = n
        replace[n.name] = [_fused(n, ins, outs, ta, tb, float(total), "scale (MatMulScaleFusion)")]
        _dead_producers(graph, producer, consumers, [i for i in scale_inputs if i], drop)
    return splice(graph, replace, drop)
