"""Shared prepare-time checks of the HTP kernels: which tensors the measured rules cover."""
from __future__ import annotations

from typing import Any, Callable

from refinterp.errors import UnsupportedOpError
from ..onnxruntime.common import ort_kernel
from ..tflite.common import where

ARCHS = {"htp_v68": "v68", "htp_v73": "v73"}
EIGHT_BIT = ("uint8", "int8")
SIXTEEN_BIT = ("uint16", "int16")


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
    """``ort_kernel`` for an HTP variant: quantized nodes run ``prepare`` / ``run``, non-quantized
    integer nodes (shape arithmetic) go to the op's ``int`` kernel, else its ``float`` one, and a
    float32 node (an op left between DequantizeLinear and QuantizeLinear, e.g. in a 16-bit model the
    QDQ fusion does not take) is refused: the HTP would run it quantized or in float16, neither
    characterised."""
    return ort_kernel(op, variant, prepare, float_refusal="(not part of a quantized node unit) is not "
                                                          "characterised on the HTP")
