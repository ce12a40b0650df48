"""Requantizing data movement under ``qnn-htp-v68`` / ``qnn-htp-v73`` against Qualcomm's HTP emulation, by the
op that made the moved codes: a graph input's QuantizeLinear (off-grid float inputs), Conv, Add, Sigmoid, a
requantizing MaxPool.  The copy table (kernels/qnn_htp/shape.py ``requant_table``) is the HTP's result only
after some producers; after the others the HTP folds the requantization into the producer (measured: up to
900 codes in 2,048 off the table).  refinterp requantizes where measured exact (``REQUANT_MEASURED``) and
refuses the rest naming the node.  Each case runs with only the final output exposed (as a phone runs the
model) and with every intermediate QuantizeLinear output exposed (as ``capture`` does): the same codes."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

import refinterp
from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp
from refinterp.kernels.qnn_htp.shape import REQUANT_MEASURED
from refinterp.passes.qdq_htp import INPUT_FOLDS, MOVE_FOLDS

from tests.conformance.test_qnn_htp_numerics import _init, _model, check_manifest, run_htp_batch
from tests.conformance.test_qnn_htp_ops import MAIN, _qdq_in, _qdq_out

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32
ZT = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "uint16": TensorProto.UINT16, "int16": TensorProto.INT16}


def _i64(v, name):
    return _init(np.array(v, np.int64), name, np.int64)


MOVES = {"Reshape": ([_i64([1, 512], "shp")], ["shp"], {}), "Flatten": ([], [], {"axis": 1}),
         "Unsqueeze": ([_i64([0], "ax")], ["ax"], {}), "Transpose": ([], [], {"perm": [0, 2, 3, 1]}),
         "DepthToSpace": ([], [], {"blocksize": 2}),
         "Pad": ([_i64([0, 0, 1, 1, 0, 0, 1, 1], "pd")], ["pd"], {"mode": "edge"}),
         "Tile": ([_i64([1, 1, 1, 2], "rep")], ["rep"], {}), "Expand": ([_i64([2, 8, 8, 8], "shp")], ["shp"], {}),
         "MaxPool": ([], [], {"kernel_shape": [2, 2], "strides": [2, 2]}),
         "Resize": ([_init(np.array([1, 1, 2, 2], F), "sc", np.float32)], ["", "sc"], {"mode": "nearest"}),
         "ResizeLinear": ([_init(np.array([1, 1, 1.5, 1.5], F), "sc", np.float32)], ["", "sc"], {"mode": "linear"})}
PRODUCERS = ("input", "Conv", "Add", "Sigmoid", "MaxPool")


def _job(rng, producer: str, move: str, act: str, expose: bool):
    info = np.iinfo(act)
    wide = 256 if act == "uint16" else 1
    code = lambda: int(rng.integers(int(info.min), int(info.max) + 1))  # noqa: E731
    s0, z0 = 0.05 / wide, (int(info.min) + int(info.max) + 1) // 2
    sp, zp = (1 / 256 / wide, int(info.min)) if producer == "Sigmoid" else (0.2 / wide, code())
    s1, z1 = float(F(sp * 10 ** rng.uniform(-0.3, 0.4))), code()
    inits, nodes = _qdq_in("x", s0, z0, act)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])]
    feeds = {"x": (rng.standard_normal((1, 8, 8, 8)) * 2).astype(F)}  # off the input's grid
    if producer == "Conv":
        inits += [_init(rng.integers(-127, 128, (8, 8, 3, 3)).astype(np.int8), "w", np.int8),
                  _init(F(0.01), "ws", np.float32), _init(0, "wz", np.int8)]
        nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
                  helper.make_node("Conv", ["x_d", "wd"], ["p"], pads=[1, 1, 1, 1])]
    elif producer == "Add":
        i2, n2 = _qdq_in("b", s0 * 1.3, z0, act)
        inits, nodes = inits + i2, nodes + n2 + [helper.make_node("Add", ["x_d", "b_d"], ["p"])]
        ins.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 8, 8, 8]))
        feeds["b"] = rng.standard_normal((1, 8, 8, 8)).astype(F)
    elif producer in ("Sigmoid", "MaxPool"):
        attrs = {"kernel_shape": [1, 1]} if producer == "MaxPool" else {}
        nodes.append(helper.make_node(producer, ["x_d"], ["p"], **attrs))
    src = "x_d"
    if producer != "input":
        i1, n1 = _qdq_out("p", "t", sp, zp, act)
        inits, nodes, src = inits + i1, nodes + n1, "t_dq"
    mi, margs, mattrs = MOVES[move]
    io, no = _qdq_out("r", "y", s1, z1, act)
    nodes = nodes + [helper.make_node("Resize" if move.startswith("Resize") else move, [src] + margs, ["r"],
                                      **mattrs)] + no
    outs = [helper.make_tensor_value_info("y", ZT[act], None)]
    if expose:
        outs += [helper.make_tensor_value_info(n, ZT[act], None) for n in ["x_q"] + (["t"] if src == "t_dq" else [])]
    return _model(nodes, inits + list(mi) + io, ins, outs), feeds


def _measured(producer: str, move: str, act: str) -> bool:
    if producer == "input" and move in INPUT_FOLDS:  # folded into the input's QuantizeLinear (float input)
        return True
    if producer in MOVE_FOLDS.get(move, ()) and not (producer == "Add" and act == "uint16"):  # the producer re-run
        return True  # onto the move's parameters (Pad: edge mode here)
    return (producer, "Resize" if move.startswith("Resize") else move) in REQUANT_MEASURED.get(act, ())


CASES = [(a, act) for a in MAIN for act in ("uint8", "int8", "uint16")]


@pytest.mark.parametrize("arch,act", CASES)
def test_requantizing_moves_by_producer(tmp_path, arch, act):
    """Every producer x move (16-bit: the moves the HTP rules take at 16 bits), two random parameter sets,
    hidden and exposed intermediates: where measured, every output code equals the emulator; elsewhere the
    Session is refused naming the requantizing node.  A DepthToSpace or edge Pad after a Conv or an Add is the
    producer re-run onto the move's parameters (passes/qdq_htp.py ``_move_folds``; refused before)."""
    rng = np.random.default_rng(zlib.crc32(repr(("requant", arch, act)).encode()))
    moves = [m for m in MOVES if act != "uint16" or m in ("Reshape", "Flatten", "Unsqueeze", "Tile", "Expand",
                                                          "DepthToSpace", "Pad")]
    jobs, refused, checked = [], 0, 0
    for producer in PRODUCERS:
        if act == "uint16" and producer in ("Sigmoid", "MaxPool"):  # not characterised at 16 bits
            continue
        for move in moves:
            for k in range(2):
                for expose in (False, True):
                    m, feeds = _job(rng, producer, move, act, expose)
                    if _measured(producer, move, act):
                        jobs.append((m, feeds))
                        continue
                    p = tmp_path / f"r{len(jobs)}_{refused}.onnx"
                    p.write_bytes(m.SerializeToString())
                    with pytest.raises(UnsupportedOpError, match="requantiz") as e:
                        refinterp.Session(refinterp.load(str(p)), f"qnn-htp-v{arch}")
                    assert "node '" in str(e.value)
                    refused += 1
    manifest = []
    for i, (m, feeds) in enumerate(jobs):
        mp, fp, op = tmp_path / f"m{i}.onnx", tmp_path / f"f{i}.npz", tmp_path / f"o{i}.npz"
        mp.write_bytes(m.SerializeToString())
        np.savez(fp, **feeds)
        manifest.append([str(mp), str(fp), str(op), arch, [o.name for o in m.graph.output]])
    run_htp_batch(tmp_path, manifest)
    checked += check_manifest(manifest)
    assert refused > 20 and (checked > 10000 or act == "uint16"), (checked, refused)


FOLD_ARGS = {"Reshape": ([_i64([1, -1], "shp")], ["shp"], {}), "Flatten": ([], [], {"axis": 2}),
             "Squeeze": ([_i64([0], "ax")], ["ax"], {}), "Unsqueeze": ([_i64([1], "ax")], ["ax"], {}),
             "Tile": ([_i64([1, 2, 1, 1], "rep")], ["rep"], {}), "Expand": ([_i64([3, 4, 6, 6], "shp")], ["shp"], {})}


@pytest.mark.parametrize("arch", MAIN)
def test_requantizing_reshape_likes_fold_into_the_input_quantizer(tmp_path, arch):
    """Graph input -> QuantizeLinear -> requantizing Reshape / Flatten / Squeeze / Unsqueeze / Tile / Expand, 8
    and 16 bit (int16 too), off-grid float inputs with saturated ends, 3 parameter sets each: the HTP's codes
    are the float input clamped to the input's range and quantized once onto the move's parameters
    (passes/qdq_htp.py ``_input_folds``), 0 codes off; the copy table of the input's codes would miss."""
    assert set(FOLD_ARGS) == set(INPUT_FOLDS)
    rng = np.random.default_rng(zlib.crc32(repr(("input-fold", arch)).encode()))
    manifest, params, table_misses = [], [], 0
    for act in ("uint8", "int8", "uint16", "int16"):
        info = np.iinfo(act)
        wide = 256 if info.bits == 16 else 1
        for op, (mi, margs, mattrs) in FOLD_ARGS.items():
            for k in range(3):
                s0 = float(F(0.02 / wide * 10 ** rng.uniform(-0.3, 0.3)))
                z0 = int(rng.integers(int(info.min) // 2, int(info.max) // 2 + 1))
                s1 = float(F(s0 * 10 ** rng.uniform(-0.4, 0.4)))
                z1 = int(rng.integers(int(info.min) // 2, int(info.max) // 2 + 1))
                inits, nodes = _qdq_in("x", s0, z0, act)
                io, no = _qdq_out("r", "y", s1, z1, act)
                nodes = nodes + [helper.make_node(op, ["x_d"] + margs, ["r"], **mattrs)] + no
                outs = [helper.make_tensor_value_info(n, ZT[act], None) for n in ("y", "x_q")]
                span = (int(info.max) - int(info.min)) * s0
                x = ((rng.standard_normal((1, 4, 6, 6)) * 0.4 + rng.uniform(-0.2, 0.2)) * span
                     - (z0 - (int(info.min) + int(info.max)) / 2) * s0).astype(F)  # off the grid, ~5% saturated
                m = _model(nodes, inits + list(mi) + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                         [1, 4, 6, 6])], outs)
                i = len(manifest)
                mp, fp, op_ = tmp_path / f"m{i}.onnx", tmp_path / f"f{i}.npz", tmp_path / f"o{i}.npz"
                mp.write_bytes(m.SerializeToString())
                np.savez(fp, x=x)
                manifest.append([str(mp), str(fp), str(op_), arch, ["y", "x_q"]])
                params.append((op, act, s0, z0, s1, z1))
    run_htp_batch(tmp_path, manifest)
    check_manifest(manifest)
    for (_, _, op_, _, _), (op, act, s0, z0, s1, z1) in zip(manifest, params):
        if op in ("Tile", "Expand"):  # the other moves keep the element order
            continue
        with np.load(op_, allow_pickle=False) as f:
            lo, hi = int(np.iinfo(act).min), int(np.iinfo(act).max)
            real = ((f["x_q"].ravel().astype(np.int64) - z0).astype(F) * F(s0)).astype(F)
            copy = htp.quantize_float(real, s1, z1, lo, hi)
            table_misses += int(np.count_nonzero(copy != f["y"].ravel()))
    assert len(manifest) == 72 and table_misses > 0, table_misses  # the cases tell the two rules apart
