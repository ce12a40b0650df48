"""Shared prepare-time checks of the HTP kernels: which tensors the measured rules cover."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from refinterp.errors import UnsupportedOpError
from ..onnxruntime.common import is_quantized
from ..registry import Delegate, get, kernel, module_settings, require
from ..tflite.common import where

ARCHS = {"htp_v68": "v68", "htp_v73": "v73"}
EIGHT_BIT = ("uint8", "int8")


def require_8bit(node, tensors, what: str = "8-bit activations") -> None:
    """The HTP rules here are measured on uint8 / int8 activations only (16-bit: not characterised)."""
    for t in tensors:
        if t is not None and t.dtype not in EIGHT_BIT:
            raise UnsupportedOpError(f"{where(node)}: tensor '{t.name}' is {t.dtype}; refinterp's HTP "
                                     f"arithmetic covers {what} only (16-bit not characterised yet)")


def shift_of(dtype: str) -> int:
    """int8 tensors are computed as uint8 with codes and zero points moved by +128 (htp_ops.py)."""
    return 128 if dtype == "int8" else 0


def htp_kernel(op: str, variant: str, prepare: Callable[..., Any]):
    """Decorator: ``run(plan, *inputs)`` for quantized nodes.  A float32 node (an op left between
    DequantizeLinear and QuantizeLinear, e.g. in a 16-bit model the QDQ fusion does not take) is
    refused: the HTP would run it quantized or in float16, neither characterised.  Non-quantized
    integer nodes (shape arithmetic) go to the op's ``int`` kernel, else its ``float`` one."""
    def deco(run):
        def prep(node, ctx):
            first_in = ctx.inputs[0] if ctx.inputs else None
            first_out = ctx.outputs[0] if ctx.outputs else None
            if is_quantized(first_in) or is_quantized(first_out):
                return prepare(node, ctx)
            if first_in is not None and first_in.dtype and np.dtype(first_in.dtype).kind in "iub":
                fk = get(op, "int") or require(op, "float")
                return Delegate(fk, fk.prepare(node, ctx))
            raise UnsupportedOpError(f"{where(node)}: a float {op} (not part of a quantized node unit) is not "
                                     "characterised on the HTP")

        def dispatch(plan, *args):
            if isinstance(plan, Delegate):
                return plan.kernel.run(plan.plan, *args)
            return run(plan, *args)

        reads = tuple(module_settings(run.__module__, getattr(prepare, "__module__", "")))
        kernel(op, variant, prepare=prep, settings=reads)(dispatch)
        return run
    return deco
