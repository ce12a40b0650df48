"""Run a real runtime installed alongside and collect every intermediate tensor (the x86 "device").

Runtimes (imported lazily; a missing one is a clear one-line error):
  litert-ref      LiteRT, reference kernels (BUILTIN_REF), experimental_preserve_all_tensors=True
  litert-opt      LiteRT, optimized built-in kernels without default delegates
  litert-xnnpack  LiteRT, built-in kernels with the default XNNPACK delegate
  tflm            TFLite Micro Python interpreter, kPreserveAllTensors
  onnxruntime     ONNX Runtime CPU with every node output made a graph output

Tensors are named as refinterp's loader names them (TFLite tensors by index), so the dump aligns
by exact name.  Note (peer-tools.md): preserving all tensors can change LiteRT's kernel paths.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError, RefinterpError
from ..ir import Graph

RUNTIMES = ("litert-ref", "litert-opt", "litert-xnnpack", "tflm", "onnxruntime")


class RuntimeMissing(RefinterpError):
    pass


def _order(graph: Graph) -> list[str]:
    out: list[str] = []
    for n in list(graph.inputs) + [o for nd in graph.nodes for o in nd.outputs if o]:
        if n not in out:
            out.append(n)
    return out


def _by_index(graph: Graph) -> dict[int, str]:
    return {t.index: n for n, t in graph.tensors.items() if t.index is not None}


def capture_litert(graph: Graph, feed: dict[str, np.ndarray], kind: str) -> dict[str, np.ndarray]:
    try:
        from ai_edge_litert import interpreter as litert
    except ImportError:
        raise RuntimeMissing("LiteRT is not installed (pip install ai-edge-litert)") from None
    resolver = {"litert-ref": litert.OpResolverType.BUILTIN_REF,
                "litert-opt": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                "litert-xnnpack": litert.OpResolverType.BUILTIN}[kind]
    it = litert.Interpreter(model_path=graph.path, experimental_op_resolver_type=resolver,
                            experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    names = _by_index(graph)
    for d in it.get_input_details():
        name = names.get(d["index"], d["name"])
        it.set_tensor(d["index"], np.asarray(feed[name]).astype(d["dtype"], copy=False))
    it.invoke()
    wanted = set(_order(graph))
    out = {}
    for d in it.get_tensor_details():
        name = names.get(d["index"])
        if name in wanted:
            try:
                out[name] = np.array(it.get_tensor(d["index"]))
            except ValueError:
                continue
    return out


def capture_tflm(graph: Graph, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    try:
        from tflite_micro.python.tflite_micro import runtime as tflm
    except ImportError:
        raise RuntimeMissing("TFLite Micro is not installed (pip install tflite-micro)") from None
    it = tflm.Interpreter.from_file(graph.path, intrepreter_config=tflm.InterpreterConfig.kPreserveAllTensors)
    for i, name in enumerate(graph.inputs):
        it.set_input(np.asarray(feed[name]), i)
    it.invoke()
    out = {}
    for name in _order(graph):
        info = graph.tensors[name]
        if info.index is None:
            continue
        v = it.GetTensor(info.index, 0)
        if isinstance(v, dict):
            v = v.get("tensor_data", v.get("data"))
        if v is not None:
            out[name] = np.array(v).reshape([d for d in info.shape]) if info.shape and None not in info.shape \
                else np.array(v)
    return out


def capture_onnxruntime(graph: Graph, feed: dict[str, np.ndarray], opt_level: str = "all") -> dict[str, Any]:
    try:
        import onnxruntime as ort
    except ImportError:
        raise RuntimeMissing("ONNX Runtime is not installed (pip install onnxruntime)") from None
    from ..loaders.onnx_dump_io import model_with_all_outputs

    data, _ = model_with_all_outputs(graph.path)
    so = ort.SessionOptions()
    so.graph_optimization_level = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                   "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                   "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                                   "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[opt_level]
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    vals = sess.run(names, {k: np.asarray(v) for k, v in feed.items()})
    out = {n: np.asarray(feed[n]) for n in graph.inputs}
    out.update({n: np.asarray(v) for n, v in zip(names, vals)})
    return {n: out[n] for n in _order(graph) if n in out}


def capture(graph: Graph, runtime: str, samples: list[dict[str, np.ndarray]],
            ort_opt_level: str = "all") -> list[dict[str, np.ndarray]]:
    if runtime not in RUNTIMES:
        raise InputError(f"unknown runtime '{runtime}' (known: {', '.join(RUNTIMES)})")
    fmt_ok = graph.format == ("onnx" if runtime == "onnxruntime" else "tflite")
    if not fmt_ok:
        raise InputError(f"runtime '{runtime}' cannot run a {graph.format} model", graph.path)
    out = []
    for feed in samples:
        try:
            if runtime == "onnxruntime":
                out.append(capture_onnxruntime(graph, feed, ort_opt_level))
            elif runtime == "tflm":
                out.append(capture_tflm(graph, feed))
            else:
                out.append(capture_litert(graph, feed, runtime))
        except RefinterpError:
            raise
        except Exception as e:  # the runtime's own error types (shape/dtype mismatch, unsupported op)
            msg = " ".join(str(e).split())
            raise RefinterpError(f"{runtime} failed: {type(e).__name__}: {msg[:300]}", graph.path) from None
    return out
