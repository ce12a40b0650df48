"""TFLite full-integer UNIDIRECTIONAL_SEQUENCE_LSTM, "8x8_16" (int8 input / output / hidden state,
int16 cell state, int8 weights, int32 biases), as LiteRT's ``lstm_eval.cc`` (LstmStepInteger8x8_16)
computes it; the multipliers as ``unidirectional_sequence_lstm.cc`` prepares them.

Scope: no layer norm, no peephole, no projection (a node with any of them is refused); CIFG (no
input gate) is supported.  Inputs as in ``kernels/float/recurrent.py``.

Prepare (float32 arithmetic as the C++; gate outputs on the fixed Q3.12 scale 2^-12)::

    eff_in[g]  = f32(f32(s_Wg * s_x) / 2^-12)   eff_rec[g] = f32(f32(s_Rg * s_h) / 2^-12)
    eff_hidden = f32(2^-15 / s_hidden * 2^-15)   (s_hidden, zp_hidden: the converter's 5th intermediate)
    each -> QuantizeMultiplier;   cell_shift = CheckedLog2(s_c) (the cell scale is a power of two)
    bias_in[g] = bias[g] - zp_x * sum_k Wg[:, k]  bias_rec[g] = -zp_h * sum_k Rg[:, k]   (int32)
    cell_clip  = int16(trunc(clamp(f32(clip / s_c), -32768, 32767)))  (0: none)

Per time step (every value int32-range; int16 results as stated)::

    gate_g = sat16(sat16(MBQM(bias_in[g] + Wg x, eff_in[g])) + MBQM(bias_rec[g] + Rg h, eff_rec[g]))
             (x, h raw int8 codes; the first sum is added to a zeroed int16 gate and saturated too)
    i, f, o = logistic(gate) (gemmlowp int16, 3 integer bits -> Q0.15);  g = tanh(gate, 3 bits)
    CIFG: i = 32767 - f
    c = wrap16(RDBP(f * c, 15)) +sat wrap16(RDBP(i * g, 30 + cell_shift)), then clamp to +-cell_clip
    h = clamp8(MBQM(o * tanh(c, 15 + cell_shift integer bits), eff_hidden) + zp_hidden)
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
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

_F = np.float32
_I64 = np.int64
_ALL16 = np.arange(-32768, 32768, dtype=_I64)
# gate order in the input list: input, forget, cell, output
_W_IN, _W_REC, _BIAS = (1, 2, 3, 4), (5, 6, 7, 8), (12, 13, 14, 15)
LSTM_IMPLS = ("litert", "tflm")


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
    if any(ins[k] is not None for k in (9, 10, 11)):
        raise UnsupportedOpError(f"{w}: integer LSTM with peephole weights is not supported")
    if any(ins[k] is not None for k in (16, 17)):
        raise UnsupportedOpError(f"{w}: integer LSTM with a projection is not supported")
    if any(ins[k] is not None for k in (20, 21, 22, 23)):
        raise UnsupportedOpError(f"{w}: integer LSTM with layer normalization is not supported")
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
    if tflm and cifg:  # LstmTensors::ValidateTensorStatus requires all eight weight tensors
        raise UnsupportedOpError(f"{w}: TFLite Micro's LSTM has no CIFG form (it requires the input-gate "
                                 f"weights; the runtime fails to allocate tensors)")
    gate_scale = _F(2.0 ** -12)
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
            eff_in.append(quantize_multiplier(float(_F(_F(_F(swi) * _F(sx)) / gate_scale))))
            eff_rec.append(quantize_multiplier(float(_F(_F(_F(swr) * _F(sh)) / gate_scale))))
        b = ins[_BIAS[g]]
        bias = np.zeros(wi.const.shape[0], _I64) if b is None or b.const is None else np.asarray(b.const, _I64)
        bias_in.append(bias - zx * np.asarray(wi.const, _I64).sum(axis=1))
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
    inter = node.attrs.get("intermediate_quant") or []
    if len(inter) < 5 or inter[4] is None:
        raise UnsupportedOpError(f"{w}: integer LSTM needs the quantized hidden intermediate tensor")
    s_hidden, hidden_zp = inter[4]
    eff_hidden = quantize_multiplier(float(_F(2.0 ** -15 / float(_F(s_hidden)) * 2.0 ** -15)))
    cell_clip = int(np.trunc(min(max(float(_F(_F(clip) / _F(sc))), -32768.0), 32767.0))) if clip > 0 else 0
    return IntLstmPlan(w, bool(node.attrs.get("time_major", False)), cifg, int(zx), int(zh), int(hidden_zp),
                       tuple(eff_in), tuple(eff_rec), eff_hidden, tuple(bias_in), tuple(bias_rec), int(cell_shift),
                       cell_clip, rnd, gemmlowp16.logistic(_ALL16, 3), gemmlowp16.tanh(_ALL16, 3),
                       gemmlowp16.tanh(_ALL16, 15 + int(cell_shift)))


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

    def gate(g: int, xt: np.ndarray) -> np.ndarray:
        # 8x8_16: each product sum < 2^31 for the converter's sizes (|x w| <= 2^14 per term); 16x8:
        # int64 sums (|x w| <= 2^22).  LiteRT adds the recurrent product into the int16 gate and
        # saturates the sum; TFLM saturates it first (its own FullyConnected output), then adds.
        a = _sat16(mbqm(plan.bias_in[g] + xt @ W[g].T, *plan.eff_in[g], rfc))
        b = mbqm(plan.bias_rec[g] + h @ R[g].T, *plan.eff_rec[g], rfc)
        return _sat16(a + (_sat16(b) if tflm else b))

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
        h = np.clip(mbqm(o * plan.tanh_cell[c + 32768], *plan.eff_hidden, r) + plan.hidden_zp, *hrange)
        outs.append(h)
    y = np.stack(outs) if outs else np.zeros((0, batch, n_out), _I64)
    if not plan.time_major:
        y = np.swapaxes(y, 0, 1)
    dt = np.dtype(plan.act_dtype)
    return np.ascontiguousarray(y).astype(dt), h.astype(dt), c.astype(np.int16)
