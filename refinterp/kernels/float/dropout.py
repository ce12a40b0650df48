"""Dropout (ONNX, every opset; the loader turns the pre-12 ``ratio`` attribute into an input).

Inference (no ``training_mode`` input, or a false one, or ratio 0): the output is the input, bit for
bit, and the optional mask is all true; registered for ``float`` and ``int`` since no value changes.

Training mode is random by definition.  With a ``seed`` attribute refinterp draws the mask as ONNX's
reference implementation does (numpy's legacy ``RandomState(seed).uniform(0, 1, shape) >= ratio``,
float64) and scales kept values by ``1 / (1 - ratio)``, so onnx's own cases reproduce; runtimes with
their own generators (ONNX Runtime) give other masks.  Without a seed there is no answer to reproduce:
refused.  Under an integer variant training mode is refused (the scale would act on stored codes).
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import InputError
from ..registry import attr_plan, kernel


def _training(plan, ratio, training_mode) -> tuple[bool, float]:
    r = 0.5 if ratio is None else float(np.asarray(ratio).reshape(()))
    on = training_mode is not None and bool(np.asarray(training_mode).reshape(()))
    if on and not 0.0 <= r < 1.0:
        raise InputError(f"{plan.where}: ratio {r} outside [0, 1)")
    return on and r > 0.0, r


def _outputs(plan, y, mask):
    """(y, mask) when the node has a mask output: bool (opset >= 10) or the declared type (opset 7-9:
    the input's type)."""
    if len(plan.out_dtypes) < 2:
        return y
    dt = plan.out_dtypes[1]
    return y, (mask if not dt or dt == "bool" else mask.astype(dt))


@kernel("Dropout", "float", prepare=attr_plan)
def _dropout(plan, x, ratio=None, training_mode=None):
    on, r = _training(plan, ratio, training_mode)
    if not on:
        return _outputs(plan, x, np.ones(x.shape, dtype=bool))
    seed = plan.attr("seed")
    if seed is None:
        raise InputError(f"{plan.where}: training-mode Dropout without a 'seed' attribute is random; "
                         "there is no answer to reproduce")
    mask = np.random.RandomState(int(seed)).uniform(0.0, 1.0, x.shape) >= r
    y = (mask * x.astype(np.float64) * (1.0 / (1.0 - r))).astype(x.dtype)
    return _outputs(plan, y, mask)


@kernel("Dropout", "int", prepare=attr_plan)
def _dropout_int(plan, x, ratio=None, training_mode=None):
    on, _ = _training(plan, ratio, training_mode)
    if on:
        raise InputError(f"{plan.where}: training-mode Dropout on a quantized tensor is not modelled")
    return _outputs(plan, x, np.ones(x.shape, dtype=bool))
