"""HTP data movement (Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Slice, Gather, Split,
DepthToSpace, SpaceToDepth, Concat, Pad): with every quantized input and output on the same
parameters the generic ``int`` kernel copies the codes; otherwise the node is refused when the Session
is built -- the HTP's requantizing copy is not characterised (measured for Concat: neither the Add
nor the window-average rule per input), and the ``int`` kernels would silently copy or rescale
another backend's way.  Float data is refused too (the HTP would run it in float16)."""
from __future__ import annotations

from refinterp.errors import UnsupportedOpError
from ..int.shape_quant import same_params
from ..onnxruntime.common import is_quantized
from ..registry import Delegate, kernel, require
from ..tflite.common import where
from .common import ARCHS


def _prepare(node, ctx):
    x = ctx.inputs[0] if ctx.inputs else None
    if x is not None and x.dtype in ("float32", "float16"):
        raise UnsupportedOpError(f"{where(node)}: a float {node.op} is not characterised on the HTP (it would run "
                                 "in float16 there)")
    data = [t for t in (ctx.inputs if node.op == "Concat" else ctx.inputs[:1]) if is_quantized(t)]
    for t in data[1:] + [o for o in ctx.outputs if is_quantized(o)]:
        if not same_params(data[0], t) if data else False:
            raise UnsupportedOpError(f"{where(node)}: tensors '{data[0].name}' and '{t.name}' have different "
                                     "quantization; the HTP's requantizing copy is not characterised")
    k = require(node.op, "int")
    return Delegate(k, k.prepare(node, ctx))


def _run(plan, *args):  # a Session resolves the Delegate itself; this serves direct calls
    return plan.kernel.run(plan.plan, *args)


kernel(("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather", "Split", "DepthToSpace",
        "SpaceToDepth", "Concat", "Pad"), tuple(ARCHS), prepare=_prepare)(_run)
