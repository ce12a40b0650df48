"""Runs inside the emulated aarch64 Python (``arm64_env.command``), as a script: it imports only
NumPy and the runtime, never refinterp.  ``python arm64_child.py FOLDER``; FOLDER holds
``request.json`` ({"runtime": "litert" | "tflite" | "onnxruntime", "resolver" | "level", "inputs",
"save_optimized"}), the model (``model.bin``) and the feeds (``in.npz``, arrays a0.. in
``inputs`` order).  Writes ``out.npz`` + ``out.json`` (keys: LiteRT tensor indices as strings, ONNX
Runtime output names) and, when asked, ``optimized.onnx``.  Errors: ``error.txt``, exit 3."""
import json
import sys
from pathlib import Path

import numpy as np


def _litert(d: Path, req: dict, feeds: list) -> dict:
    if req["runtime"] == "tflite":
        from tflite_runtime import interpreter as lite
    else:
        from ai_edge_litert import interpreter as lite
    resolver = {"ref": lite.OpResolverType.BUILTIN_REF,
                "opt": lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                "xnnpack": lite.OpResolverType.BUILTIN}[req["resolver"]]
    it = lite.Interpreter(model_path=str(d / "model.bin"), num_threads=1, experimental_op_resolver_type=resolver,
                          experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    for det, x in zip(it.get_input_details(), feeds):
        it.set_tensor(det["index"], np.asarray(x).astype(det["dtype"], copy=False))
    it.invoke()
    out = {}
    for det in it.get_tensor_details():
        if np.dtype(det["dtype"]).kind not in "iuf":
            continue
        try:
            out[str(det["index"])] = np.array(it.get_tensor(det["index"]))
        except ValueError:
            continue
    if req["runtime"] == "tflite":
        for i in overwritten(it, [int(k) for k in out]):
            out.pop(str(i), None)
    return out


def overwritten(it, held) -> list:
    """tflite-runtime 2.14 runs residual ADD / MUL in place even with preserve_all_tensors: of the
    tensors ``held`` (indices) of the invoked interpreter ``it`` whose buffers overlap, only the last
    op's output holds its own values; the others (returned) are not dumped or compared (a device
    dump of such a model could not hold them either).  Also used by the tests' LiteRT oracle."""
    writer = {}
    for k, op in enumerate(it._get_ops_details()):
        for o in op["outputs"]:
            writer[int(o)] = k
    spans = []
    for i in held:
        arr = it.tensor(i)()
        ptr = arr.__array_interface__["data"][0]
        if ptr and arr.nbytes:
            spans.append((ptr, ptr + arr.nbytes, i))
    spans.sort()
    groups, end = [], -1
    for lo, hi, i in spans:  # overlapping buffers form one group
        if lo < end:
            groups[-1].append(i)
            end = max(end, hi)
        else:
            groups.append([i])
            end = hi
    drop = []
    for members in groups:
        if len(members) > 1:
            last = max(members, key=lambda i: writer.get(i, -1))
            drop += [i for i in members if i != last]
    return drop


def _onnxruntime(d: Path, req: dict, feeds: list) -> dict:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, req["level"])
    if req.get("save_optimized"):
        so.optimized_model_filepath = str(d / "optimized.onnx")
    sess = ort.InferenceSession(str(d / "model.bin"), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    vals = sess.run(names, dict(zip(req["inputs"], feeds)))
    return {n: np.asarray(v) for n, v in zip(names, vals)}


def main(folder: str) -> int:
    d = Path(folder)
    try:
        req = json.loads((d / "request.json").read_text())
        with np.load(d / "in.npz", allow_pickle=False) as z:
            feeds = [z[f"a{i}"] for i in range(len(req["inputs"]))]
        out = _onnxruntime(d, req, feeds) if req["runtime"] == "onnxruntime" else _litert(d, req, feeds)
    except Exception as e:  # the runtime's own error: reported by the parent as one line
        (d / "error.txt").write_text(f"{type(e).__name__}: {' '.join(str(e).split())[:400]}")
        return 3
    keys = list(out)
    np.savez(d / "out.npz", **{f"a{i}": out[k] for i, k in enumerate(keys)})
    (d / "out.json").write_text(json.dumps(keys))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
