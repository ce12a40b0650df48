"""Registration helper of the ONNX Runtime integer kernels (``ort``/``onnx_ref`` variants).

In ONNX graphs the same canonical op appears both quantized (QOperator ops, fused QDQ units) and in
float (ops left between DequantizeLinear and QuantizeLinear).  A kernel registered with
``ort_kernel`` runs its integer maths when the node's first input or first output is a quantized
integer tensor, and otherwise hands the node (``registry.Delegate``) to the op's ``int`` kernel
(non-quantized integer inputs, when registered) or ``float`` kernel, so a scheme listing ``ort``
first still runs float nodes in float32 and shape arithmetic exactly, and the session reports
(and dequantizes / applies fused activations for) them as the kernel that runs them.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from refinterp.errors import UnsupportedOpError
from ..registry import Delegate, get, kernel, module_settings, require


MS = "com.microsoft."  # the domain prefix of ONNX Runtime's contrib ops in refinterp's op names


def is_quantized(t) -> bool:
    return t is not None and t.quant is not None and np.dtype(t.dtype).kind in "iu"


def float32_node_or_delegate(node, ctx) -> tuple[Delegate, bool]:
    """(the generic float kernel's Delegate for ``node``, whether its first input is a plain float32
    tensor and nothing it reads or writes is quantized): the test ORT's float32-only kernels use."""
    fk = require(node.op, "float")
    d = Delegate(fk, fk.prepare(node, ctx))
    x = ctx.inputs[0] if ctx.inputs else None
    ok = x is not None and str(x.dtype) == "float32" and not is_quantized(x) and \
        not any(is_quantized(t) for t in ctx.outputs if t)
    return d, ok


def rnn_default_float(node, ctx, defaults: tuple[str, ...]):
    """(the generic float kernel's Delegate for the RNN ``node``, (x, w, r, directions) or None): the
    tensors when X is a plain float32 tensor, W and R are present and the activations are ORT's default
    ones (``defaults`` per direction) -- the case ORT's DeepCPU kernels take."""
    fk = require(node.op, "float")
    d = Delegate(fk, fk.prepare(node, ctx))
    ins = list(ctx.inputs) + [None] * 3
    x, w, r = ins[0], ins[1], ins[2]
    acts = node.attrs.get("activations")
    n_dir = 2 if str(node.attrs.get("direction", "forward")) == "bidirectional" else 1
    if x is None or w is None or r is None or str(x.dtype) != "float32" or is_quantized(x) \
            or (acts is not None and tuple(str(a).lower() for a in acts) != defaults * n_dir):
        return d, None
    return d, (x, w, r, n_dir)


def rnn_checked_inputs(plan, gates: int, x, w, r, seq_lens):
    """(x, w, r, lens) of a DeepCPU-style RNN call when they fit the plan (float32, W (D, gates H, I),
    R (D, gates H, H)), else None (the generic kernel runs); sequence_lens out of [0, T] is an InputError."""
    from refinterp.errors import InputError

    x, w, r = np.asarray(x), np.asarray(w), np.asarray(r)
    hid = plan.hidden
    f32 = np.dtype(np.float32)
    if x.dtype != f32 or w.dtype != f32 or r.dtype != f32 or x.ndim != 3 \
            or w.shape != (plan.n_dir, gates * hid, x.shape[2]) or r.shape != (plan.n_dir, gates * hid, hid):
        return None
    t_len, batch = x.shape[0], x.shape[1]
    lens = np.full(batch, t_len, np.int64) if seq_lens is None else np.asarray(seq_lens).astype(np.int64)
    if lens.shape != (batch,) or np.any(lens < 0) or np.any(lens > t_len):
        raise InputError(f"{plan.where}: sequence_lens {lens.tolist()} outside [0, {t_len}] or not one per row")
    return x, w, r, lens


def ort_kernel(op: str, variants, prepare: Callable[..., Any], impls: tuple[str, ...] = (),
               float_refusal: str | None = None):
    """Decorator: ``run(plan, *inputs)`` for quantized nodes; float nodes use ``(op, "int")`` when
    registered, else ``(op, "float")`` (the one fallback).  ``impls``: as ``registry.kernel``.
    ``float_refusal``: a backend without a characterised float form refuses a node whose data is
    neither quantized nor integer, with this reason (UnsupportedOpError naming the node)."""
    def deco(run):
        def prep(node, ctx):
            first_in = ctx.inputs[0] if ctx.inputs else None
            first_out = ctx.outputs[0] if ctx.outputs else None
            if is_quantized(first_in) or is_quantized(first_out):
                return prepare(node, ctx)
            # non-quantized integer data (shapes, indices): the generic ``int`` kernel when there is one
            integer = first_in is not None and first_in.dtype and np.dtype(first_in.dtype).kind in "iub"
            if float_refusal is not None and not integer:
                raise UnsupportedOpError(f"node '{node.name}' ({node.source_op or node.op}): a float {op} "
                                         f"{float_refusal}")
            fk = get(op, "int") if integer else None
            fk = fk or require(op, "float")
            return Delegate(fk, fk.prepare(node, ctx))

        def dispatch(plan, *args):
            if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
                return plan.kernel.run(plan.plan, *args)
            return run(plan, *args)

        reads = tuple(module_settings(run.__module__, getattr(prepare, "__module__", "")))
        kernel(op, variants, prepare=prep, impls=impls, settings=reads)(dispatch)
        return run
    return deco
