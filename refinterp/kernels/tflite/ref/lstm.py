"""TFLite full-integer UNIDIRECTIONAL_SEQUENCE_LSTM, "8x8_16" (int8 input / output / hidden state,
int16 cell state, int8 weights, int32 biases), as LiteRT's ``lstm_eval.cc`` (LstmStepInteger8x8_16)
computes it; the multipliers as ``unidirectional_sequence_lstm.cc`` prepares them.

Scope: CIFG (no input gate), peephole, layer normalization and projection (lstm_parts.py) under
``impl: litert``; TFLite Micro (``impl: tflm``) has none of the last three (refused).  Inputs as in
``kernels/float/recurrent.py``.

Prepare (float32 arithmetic as the C++; gate outputs on the fixed Q3.12 scale s_g = 2^-12, or with
layer normalization on the scale of the gate's intermediate tensor)::

    eff_in[g]  = f32(f32(s_Wg * s_x) / s_g)     eff_rec[g] = f32(f32(s_Rg * s_h) / s_g)
    eff_peep[g] = f32(double 2^cell_shift * s_Pg / s_g)       eff_proj = f32(f32(s_proj * s_hidden) / s_h)
    eff_hidden = f32(2^-15 / s_hidden * 2^-15)   (s_hidden, zp_hidden: the converter's 5th intermediate)
    each -> QuantizeMultiplier;   cell_shift = CheckedLog2(s_c) (the cell scale is a power of two)
    bias_in[g] = bias[g] - zp_x * sum_k Wg[:, k]  bias_rec[g] = -zp_h * sum_k Rg[:, k]   (int32;
                 with layer normalization bias[g] is left out here and added inside the norm)
    cell_clip  = int16(trunc(clamp(f32(clip / s_c), -32768, 32767)))  (0: none)

Per time step (every value int32-range; int16 results as stated)::

    gate_g = sat16(sat16(MBQM(bias_in[g] + Wg x, eff_in[g])) + MBQM(bias_rec[g] + Rg h, eff_rec[g]))
             (x, h raw int8 codes; the first sum is added to a zeroed int16 gate and saturated too)
             then the peephole and the layer norm (lstm_parts.py) where present
    i, f, o = logistic(gate) (gemmlowp int16, 3 integer bits -> Q0.15);  g = tanh(gate, 3 bits)
    CIFG: i = 32767 - f
    c = wrap16(RDBP(f * c, 15)) +sat wrap16(RDBP(i * g, 30 + cell_shift)), then clamp to +-cell_clip
    h = clamp8(MBQM(o * tanh(c, 15 + cell_shift integer bits), eff_hidden) + zp_hidden)
        (with a projection: lstm_parts.project)
    output[t] = h

RDBP is gemmlowp's RoundingDivideByPOT (ties away from zero), MBQM the scheme's
MultiplyByQuantizedMultiplier rounding.  logistic / tanh are tabulated once over every int16 input.

``impl: tflm`` (TFLite Micro's ``lstm_eval.h``, LstmStep; the same gates built from its own
reference kernels)::

    multipliers in double: FC  s_W * s_x / 2^-12, s_R * s_h / 2^-12 (s_h, zp_h: the output state);
                           f*c 2^-15;  i*g 2^-30 / s_c;  hidden 2^-30 / s_h
    gate_g = sat16(clamp16(MBQM(bias[g] + Wg (x - zp_x))) + clamp16(MBQM(Rg (h - zp_h))))
    i, f, o = reference int16 Logistic (input multiplier 3: the LUT interpolation of LOGISTIC int16)
    g = reference int16 Tanh (multiplier 3), tanh(c) with (15 + cell_shift - 3) as its input shift
    c = sat16(clamp16(MBQM(f * c)) + clamp16(MBQM(i * g))), then clamp to +-trunc(double clip / s_c)
    h = clamp8(MBQM(tanh(c) * o) + zp_h)

TFLM also runs 16x8 LSTMs (int16 input / states / output with zero points 0, int8 weights, int64
biases): the same steps with int64 gate accumulators requantized by MultiplyByQuantizedMultiplier's
int64 form (the scheme's ``requant.rounding64``) and int16 outputs.  LiteRT has no such kernel:
refused under ``impl: litert``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import gemmlowp16
from refinterp.quant.fixedpoint import quantize_multiplier, rdbp
from refinterp.quant.requant import Rounding
from ..common import checked_log2, impl, mbqm, qparams, rounding, where
from .activation import int16_sigmoid_tanh_table
from .lstm_parts import LayerNorm, Projection, layer_norm, peephole, project
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

_F = np.float32
_I64 = np.int64
_ALL16 = np.arange(-32768, 32768, dtype=_I64)
# gate order in the input list: input, forget, cell, output
_W_IN, _W_REC, _BIAS = (1, 2, 3, 4), (5, 6, 7, 8), (12, 13, 14, 15)
LSTM_IMPLS = ("litert", "litert_neon", "litert_neon_214", "tflm")  # litert_neon*: aarch64 builds (NEON layer norm)


@dataclass(frozen=True)
class IntLstmPlan:
    where: str
    time_major: bool
    cifg: bool
    zp_x: int
    zp_h: int  # the output state's zero point (in the recurrent effective biases)
    hidden_zp: int  # the hidden intermediate's zero point (added to the new output state)
    eff_in: tuple  # per gate (M, shift); None for the absent input gate (CIFG)
    eff_rec: tuple
    eff_hidden: tuple[int, int]
    bias_in: tuple  # per gate int64 [C] (None: CIFG input gate)
    bias_rec: tuple
    cell_shift: int
    cell_clip: int  # 0: no clipping
    rounding: str
    sigmoid: np.ndarray  # logistic(v, 3) for v = -32768..32767
    tanh3: np.ndarray  # tanh(v, 3)
    tanh_cell: np.ndarray  # tanh(v, 15 + cell_shift)
    impl: str = "litert"
    mul_fc: tuple[int, int] = (0, 0)  # tflm: the f * c and i * g multipliers
    mul_ig: tuple[int, int] = (0, 0)
    act_dtype: str = "int8"  # int16: TFLM's 16x8 LSTM
    rounding_fc: str = ""  # the gate FullyConnected's rounding (16x8: the int64 form)
    peephole: tuple = (None, None, None, None)  # per gate (int16 weights as int64, (M, shift)) or None
    layer_norm: tuple = (None, None, None, None)  # per gate LayerNorm or None
    neon: bool = False  # aarch64 layer norm (lstm_parts.py)
    projection: Projection | None = None


def _scale(ctx, i: int, node, what: str) -> tuple[float, int]:
    t = ctx.inputs[i] if i < len(ctx.inputs) else None
    if t is None or t.quant is None or t.quant.scale.size != 1:
        raise UnsupportedOpError(f"{where(node)}: integer LSTM needs a per-tensor quantized {what}")
    return qparams(t, node, what)


def prepare(node, ctx) -> IntLstmPlan:
    ins = list(ctx.inputs) + [None] * (24 - len(ctx.inputs))
    w = where(node)
    act = ins[0].dtype if ins[0] is not None else None
    if act not in ("int8", "int16") or ins[19] is None or ins[19].dtype != "int16":
        raise UnsupportedOpError(f"{w}: integer LSTM supports int8 (8x8_16) or int16 (16x8, TFLite Micro) "
                                 f"activations with an int16 cell state")
    use_peephole = ins[11] is not None  # as LiteRT: the output gate's peephole decides
    use_ln = ins[21] is not None  # ... and the forget gate's layer-norm coefficients
    use_proj = ins[16] is not None
    sx, zx = _scale(ctx, 0, node, "input")
    sh, zh = _scale(ctx, 18, node, "output state")
    sc, _ = _scale(ctx, 19, node, "cell state")
    pot, cell_shift = checked_log2(sc)
    if not pot:
        raise UnsupportedOpError(f"{w}: the cell state scale {sc!r} is not a power of two")
    if not 0 <= 15 + cell_shift <= 6:
        raise UnsupportedOpError(f"{w}: cell state scale 2^{cell_shift} is outside 2^-15 .. 2^-9")
    cifg = ins[1] is None
    how = impl(ctx, LSTM_IMPLS, "litert")
    tflm = how == "tflm"
    if act == "int16" and not tflm:
        raise UnsupportedOpError(f"{w}: LiteRT has no int16-activation (16x8) integer LSTM")
    if act == "int16" and (zx or zh):
        raise UnsupportedOpError(f"{w}: 16x8 LSTM needs zero points of 0")
    if how == "litert_neon_214" and use_ln:
        raise UnsupportedOpError(f"{w}: tflite-runtime 2.14's aarch64 build computes the layer-norm integer "
                                 f"LSTM differently from LiteRT 2.3 on ARM and on x86 (measured; not modelled)")
    if tflm and (use_peephole or use_ln or use_proj):
        what = "peephole weights" if use_peephole else "layer normalization" if use_ln else "a projection"
        raise UnsupportedOpError(f"{w}: TFLite Micro's integer LSTM has no form with {what} (its kernel "
                                 f"implements the Keras LSTM only)")
    if act == "int16" and (use_peephole or use_ln or use_proj):
        raise UnsupportedOpError(f"{w}: a 16x8 integer LSTM with peephole, layer norm or projection "
                                 f"is not supported")
    if tflm and cifg:  # LstmTensors::ValidateTensorStatus requires all eight weight tensors
        raise UnsupportedOpError(f"{w}: TFLite Micro's LSTM has no CIFG form (it requires the input-gate "
                                 f"weights; the runtime fails to allocate tensors)")
    inter = node.attrs.get("intermediate_quant") or []
    gate_scales = [_F(2.0 ** -12)] * 4
    if use_ln:
        if len(inter) < 4 or any(q is None for q in inter[(1 if cifg else 0):4]):
            raise UnsupportedOpError(f"{w}: a layer-norm integer LSTM needs its four quantized gate "
                                     f"intermediate tensors")
        gate_scales = [_F(q[0]) if q is not None else _F(1.0) for q in inter[:4]]
    eff_in, eff_rec, bias_in, bias_rec = [], [], [], []
    for g in range(4):
        if cifg and g == 0:
            eff_in.append(None), eff_rec.append(None), bias_in.append(None), bias_rec.append(None)
            continue
        wi, wr = ins[_W_IN[g]], ins[_W_REC[g]]
        if wi is None or wr is None or wi.const is None or wr.const is None:
            raise UnsupportedOpError(f"{w}: integer LSTM needs constant input and recurrent weights")
        swi, _ = _scale(ctx, _W_IN[g], node, "input weight")
        swr, _ = _scale(ctx, _W_REC[g], node, "recurrent weight")
        if tflm:  # GetQuantizedConvolutionMultipler: double product and division
            eff_in.append(quantize_multiplier(float(swi) * float(sx) / 2.0 ** -12))
            eff_rec.append(quantize_multiplier(float(swr) * float(sh) / 2.0 ** -12))
        else:  # float32 arithmetic, as unidirectional_sequence_lstm.cc
            eff_in.append(quantize_multiplier(float(_F(_F(_F(swi) * _F(sx)) / gate_scales[g]))))
            eff_rec.append(quantize_multiplier(float(_F(_F(_F(swr) * _F(sh)) / gate_scales[g]))))
        b = ins[_BIAS[g]]
        bias = np.zeros(wi.const.shape[0], _I64) if b is None or b.const is None else np.asarray(b.const, _I64)
        bias_in.append((0 if use_ln else bias) - zx * np.asarray(wi.const, _I64).sum(axis=1))
        bias_rec.append(-zh * np.asarray(wr.const, _I64).sum(axis=1))
    clip = float(node.attrs.get("cell_clip", 0.0))
    rnd = rounding(ctx).value
    # 16x8: int64 biases and accumulators, MultiplyByQuantizedMultiplier's int64 form (the scheme's
    # ``requant.rounding64``)
    rnd64 = Rounding.parse(((ctx.settings or {}).get("requant") or {}).get("rounding64", "mbqm64")).value
    if tflm:
        left = 15 + int(cell_shift) - 3
        tanh_cell = int16_sigmoid_tanh_table(3, -left, True) if left < 0 else int16_sigmoid_tanh_table(0, left, True)
        cell_clip = int(np.trunc(min(max(clip / float(sc), -32768.0), 32767.0))) if clip > 0 else 0
        return IntLstmPlan(w, bool(node.attrs.get("time_major", False)), cifg, int(zx), int(zh), int(zh),
                           tuple(eff_in), tuple(eff_rec), quantize_multiplier(2.0 ** -30 / float(sh)),
                           tuple(bias_in), tuple(bias_rec), int(cell_shift), cell_clip, rnd,
                           int16_sigmoid_tanh_table(0, 0, False), int16_sigmoid_tanh_table(0, 0, True), tanh_cell,
                           "tflm", quantize_multiplier(2.0 ** -15), quantize_multiplier(2.0 ** -30 / float(sc)),
                           act, rnd64 if act == "int16" else rnd)
    if len(inter) < 5 or inter[4] is None:
        raise UnsupportedOpError(f"{w}: integer LSTM needs the quantized hidden intermediate tensor")
    s_hidden, hidden_zp = inter[4]
    eff_hidden = quantize_multiplier(float(_F(2.0 ** -15 / float(_F(s_hidden)) * 2.0 ** -15)))
    cell_clip = int(np.trunc(min(max(float(_F(_F(clip) / _F(sc))), -32768.0), 32767.0))) if clip > 0 else 0
    n_cell = np.asarray(ins[_W_IN[1]].const).shape[0]
    n_output = np.asarray(ins[_W_REC[1]].const).shape[1]
    parts = _optional_parts(node, ctx, ins, cifg, use_peephole, use_ln, use_proj, gate_scales, cell_shift,
                            float(s_hidden), int(hidden_zp), sh, zh, n_cell, n_output)
    return IntLstmPlan(w, bool(node.attrs.get("time_major", False)), cifg, int(zx), int(zh), int(hidden_zp),
                       tuple(eff_in), tuple(eff_rec), eff_hidden, tuple(bias_in), tuple(bias_rec), int(cell_shift),
                       cell_clip, rnd, gemmlowp16.logistic(_ALL16, 3), gemmlowp16.tanh(_ALL16, 3),
                       gemmlowp16.tanh(_ALL16, 15 + int(cell_shift)), neon=how.startswith("litert_neon"), **parts)


def _optional_parts(node, ctx, ins, cifg, use_peephole, use_ln, use_proj, gate_scales, cell_shift, s_hidden,
                    hidden_zp, sh, zh, n_cell, n_output) -> dict:
    """Peephole, layer-norm and projection parameters as unidirectional_sequence_lstm.cc prepares them."""
    w = where(node)
    gates = (1, 2, 3) if cifg else (0, 1, 2, 3)
    peep = [None] * 4
    if use_peephole:
        if n_output > n_cell:
            raise UnsupportedOpError(f"{w}: a peephole LSTM whose projection is wider than its cell "
                                     f"({n_output} > {n_cell}) reads past LiteRT's buffers")
        for g, slot in ((0, 9), (1, 10), (3, 11)):
            if g not in gates:
                continue
            t = ins[slot]
            if t is None or t.const is None or t.dtype != "int16":
                raise UnsupportedOpError(f"{w}: integer LSTM peephole weights must be constant int16 "
                                         f"(gate {g} has {t.dtype if t is not None else 'none'})")
            sp, _ = _scale(ctx, slot, node, "peephole weight")
            eff = float(_F(2.0 ** cell_shift * float(_F(sp)) / float(gate_scales[g])))  # double, then float
            peep[g] = (np.asarray(t.const, _I64).reshape(-1), quantize_multiplier(eff))
    norms = [None] * 4
    if use_ln:
        for g in gates:
            t, b = ins[20 + g], ins[_BIAS[g]]
            if t is None or t.const is None or t.dtype != "int16" or b is None or b.const is None:
                raise UnsupportedOpError(f"{w}: a layer-norm integer LSTM needs constant int16 "
                                         f"coefficients and a constant bias for every gate")
            s_ln, _ = _scale(ctx, 20 + g, node, "layer-norm coefficient")
            guard = max(1, int(np.trunc(float(_F(_F(10000) * _F(s_ln))))))
            norms[g] = LayerNorm(np.asarray(t.const, _I64).reshape(-1), np.asarray(b.const, _I64).reshape(-1),
                                 quantize_multiplier(float(_F(s_ln))), guard)
    proj = None
    if use_proj:
        t, b = ins[16], ins[17]
        if t.const is None or t.dtype != "int8" or (b is not None and b.const is None):
            raise UnsupportedOpError(f"{w}: integer LSTM projection weights must be constant int8")
        s_p, _ = _scale(ctx, 16, node, "projection weight")
        out = ctx.outputs[0] if ctx.outputs and ctx.outputs[0] is not None else None
        s_out = float(out.quant.scale.ravel()[0]) if out is not None and out.quant is not None else sh
        wp = np.asarray(t.const, _I64)
        bias = np.zeros(wp.shape[0], _I64) if b is None else np.asarray(b.const, _I64)
        clip = float(node.attrs.get("proj_clip", 0.0))
        qclip = int(np.trunc(min(max(float(_F(_F(clip) / _F(s_out))), -128.0), 127.0))) if clip > 0 else 0
        eff = float(_F(_F(_F(s_p) * _F(s_hidden)) / _F(sh)))
        proj = Projection(wp, bias + hidden_zp * wp.sum(axis=1), quantize_multiplier(eff), int(zh), qclip)
    return {"peephole": tuple(peep), "layer_norm": tuple(norms), "projection": proj}


def _sat16(v: np.ndarray) -> np.ndarray:
    return np.clip(v, -32768, 32767)


@kernel("UnidirectionalSequenceLSTM", "tflite_ref", prepare=prepare, impls=LSTM_IMPLS)
def integer_lstm(plan: IntLstmPlan, x, w_i, w_f, w_c, w_o, r_i, r_f, r_c, r_o, p_i, p_f, p_o, b_i, b_f, b_c,
                 b_o, proj_w, proj_b, h0, c0, ln_i=None, ln_f=None, ln_c=None, ln_o=None):
    r = Rounding(plan.rounding)
    x = np.asarray(x)
    seq = (x if plan.time_major else np.swapaxes(x, 0, 1)).astype(_I64)  # [T, B, I]
    n_t, batch = seq.shape[0], seq.shape[1]
    W = [None if v is None else np.asarray(v, _I64) for v in (w_i, w_f, w_c, w_o)]
    R = [None if v is None else np.asarray(v, _I64) for v in (r_i, r_f, r_c, r_o)]
    n_cell = W[1].shape[0]
    n_out = R[1].shape[1]
    h = np.zeros((batch, n_out), _I64) if h0 is None else np.asarray(h0, _I64).reshape(batch, n_out)
    c = np.zeros((batch, n_cell), _I64) if c0 is None else np.asarray(c0, _I64).reshape(batch, n_cell)

    tflm = plan.impl == "tflm"
    hrange = (-32768, 32767) if plan.act_dtype == "int16" else (-128, 127)

    rfc = Rounding(plan.rounding_fc) if plan.rounding_fc else r

    def gate(g: int, xt: np.ndarray) -> np.ndarray:  # reads the cell state c of the enclosing step
        # 8x8_16: each product sum < 2^31 for the converter's sizes (|x w| <= 2^14 per term); 16x8:
        # int64 sums (|x w| <= 2^22).  LiteRT adds the recurrent product into the int16 gate and
        # saturates the sum; TFLM saturates it first (its own FullyConnected output), then adds.
        a = _sat16(mbqm(plan.bias_in[g] + xt @ W[g].T, *plan.eff_in[g], rfc))
        b = mbqm(plan.bias_rec[g] + h @ R[g].T, *plan.eff_rec[g], rfc)
        v = _sat16(a + (_sat16(b) if tflm else b))
        if plan.peephole[g] is not None:
            v = peephole(v, plan.peephole[g][0], c, n_out, plan.peephole[g][1], r)
        if plan.layer_norm[g] is not None:
            v = layer_norm(v, plan.layer_norm[g], r, plan.neon)
        return v

    outs = []
    for t in range(n_t):
        xt = seq[t]
        f = plan.sigmoid[gate(1, xt) + 32768]
        i = (32767 - f) if plan.cifg else plan.sigmoid[gate(0, xt) + 32768]
        g = plan.tanh3[gate(2, xt) + 32768]
        if tflm:
            c = _sat16(_sat16(mbqm(f * c, *plan.mul_fc, r)) + _sat16(mbqm(i * g, *plan.mul_ig, r)))
        else:
            c = _sat16(gemmlowp16.wrap16(rdbp(f * c, 15)) + gemmlowp16.wrap16(rdbp(i * g, 30 + plan.cell_shift)))
        if plan.cell_clip > 0:
            c = np.clip(c, -plan.cell_clip, plan.cell_clip)
        o = plan.sigmoid[gate(3, xt) + 32768]
        if plan.projection is not None:
            h = project(o, plan.tanh_cell[c + 32768], plan.eff_hidden, plan.hidden_zp, plan.projection, r)
        else:
            h = np.clip(mbqm(o * plan.tanh_cell[c + 32768], *plan.eff_hidden, r) + plan.hidden_zp, *hrange)
        outs.append(h)
    y = np.stack(outs) if outs else np.zeros((0, batch, n_out), _I64)
    if not plan.time_major:
        y = np.swapaxes(y, 0, 1)
    dt = np.dtype(plan.act_dtype)
    return np.ascontiguousarray(y).astype(dt), h.astype(dt), c.astype(np.int16)
