"""HTP data movement whose generic ``int`` kernel copies codes even when the input and output
quantization differ (Slice, Gather, Split): here such a node is refused when the Session is built
(the HTP's requantizing copy is not characterised); with equal parameters the ``int`` kernel runs."""
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
    if is_quantized(x):
        for out in ctx.outputs:
            if out is not None and is_quantized(out) and not same_params(x, out):
                raise UnsupportedOpError(f"{where(node)}: input and output quantization differ; the HTP's "
                                         "requantizing copy is not characterised")
    k = require(node.op, "int")
    return Delegate(k, k.prepare(node, ctx))


def _run(plan, *args):  # a Session resolves the Delegate itself; this serves direct calls
    return plan.kernel.run(plan.plan, *args)


kernel(("Slice", "Gather", "Split"), tuple(ARCHS), prepare=_prepare)(_run)
