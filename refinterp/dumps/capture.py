"""Run a real runtime installed alongside and collect every intermediate tensor (the x86 "device").

Runtimes (imported lazily; a missing one is a clear one-line error):
  litert-ref      LiteRT, reference kernels (BUILTIN_REF), experimental_preserve_all_tensors=True
  litert-opt      LiteRT, optimized built-in kernels without default delegates
  litert-xnnpack  LiteRT, built-in kernels with the default XNNPACK delegate
  tflm            TFLite Micro Python interpreter, kPreserveAllTensors
  onnxruntime     ONNX Runtime CPU.  At --ort-opt-level all (the default): every output of ORT's
                  optimized graph, named back to the model's tensors (see ``_capture_ort_optimized``),
                  so DQ -> op -> Q units, Conv folds, activation and NCHWc fusions stay as deployed and
                  only the tensors that exist on the device are dumped; at other levels every node
                  output of the model made a graph output
  --arch arm64    the aarch64 builds of LiteRT (litert-*) and ONNX Runtime under qemu
                  (``capture_arm64.py``; arm64-tflite2.14: the old tflite-runtime package)
  qnn-htp         Qualcomm's HTP host emulation (onnxruntime-qnn), QDQ ONNX models, every quantized
                  activation (``capture_qnn.py``; ``htp_arch`` 68 / 73 / ...)

Tensors are named as refinterp's loader names them (TFLite tensors by index), so the dump aligns
by exact name.  Note (docs/arithmetic/README.md): preserving all tensors can change LiteRT's kernel paths.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError, RefinterpError
from ..ir import Graph

RUNTIMES = ("litert-ref", "litert-opt", "litert-xnnpack", "tflm", "onnxruntime", "qnn-htp")


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
        # resource / variant handles hold no values; reading one crashes LiteRT 2.3 (SIGSEGV)
        if name in wanted and np.dtype(d["dtype"]).kind != "O":
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
        if info.index is None or info.dtype in ("resource", "variant"):
            continue  # handles hold no values; reading one crashes TFLite Micro (SIGSEGV)
        v = it.GetTensor(info.index, 0)
        if isinstance(v, dict):
            v = v.get("tensor_data", v.get("data"))
        if v is not None:
            out[name] = np.array(v).reshape([d for d in info.shape]) if info.shape and None not in info.shape \
                else np.array(v)
    return out


_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
           "all": "ORT_ENABLE_ALL"}


def _options(ort, level: str):
    """``level``: one of _LEVELS (short) or its GraphOptimizationLevel name."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS.get(level, level))
    return so


class LocalOrt:
    """Runs ONNX Runtime's CPU EP in this process (``run``: every output by name, and the graph ORT
    optimized when asked).  ``capture_arm64.EmulatedOrt`` is the same for the aarch64 wheel."""

    def __init__(self) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise RuntimeMissing("ONNX Runtime is not installed (pip install onnxruntime)") from None
        self.ort = ort

    def run(self, model: bytes | str, level: str, feed: dict[str, np.ndarray],
            save_optimized: bool = False) -> tuple[dict[str, np.ndarray], bytes | None]:
        import tempfile
        from pathlib import Path

        so = _options(self.ort, level)
        with tempfile.TemporaryDirectory(prefix="refinterp-ort-") as d:
            if save_optimized:
                so.optimized_model_filepath = str(Path(d) / "optimized.onnx")
            sess = self.ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
            opt = Path(so.optimized_model_filepath).read_bytes() if save_optimized else None
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, (np.asarray(v) for v in sess.run(names, feed)))), opt


def capture_onnxruntime(graph: Graph, feed: dict[str, np.ndarray], opt_level: str = "all",
                        runner=None) -> dict[str, Any]:
    runner = runner or LocalOrt()
    feed = {k: np.asarray(v) for k, v in feed.items()}
    if opt_level == "all":
        return _capture_ort_optimized(runner, graph, feed)
    from ..loaders.onnx_dump_io import model_with_all_outputs

    data, _ = model_with_all_outputs(graph.path)
    got, _ = runner.run(data, _LEVELS[opt_level], feed)
    out = {n: feed[n] for n in graph.inputs}
    out.update(got)
    return {n: out[n] for n in _order(graph) if n in out}


def _capture_ort_optimized(runner, graph: Graph, feed: dict[str, np.ndarray]) -> dict[str, Any]:
    """Any model at level all.  Making every tensor of the *original* model a graph output keeps ORT
    from fusing DQ -> op -> Q units, Conv + BatchNormalization / activation and NCHWc Conv + Add (a
    fused node's intermediates must stay observable), so such a capture is not what the deployed
    model computes (measured on a float MobileNetV2-224: 14 of 90 tensors as deployed).  Instead: ORT saves the graph it optimized
    (``optimized_model_filepath``), the optimized graph's node outputs become graph outputs and it
    runs with optimizations disabled (it is already optimized; nothing left to fuse), and its final
    outputs must equal those of a plain session on the original model at level all (checked per
    sample, else an error).  Tensors are named back to the original model
    (``onnx_dump_io.optimized_with_outputs``); uint8 tensors ORT re-encoded from int8 (x86
    QDQS8ToU8Transformer: zero point + 128, same scale) are shifted back by 128, channels-last tensors
    of ORT's NHWC layout transformer are transposed back; a tensor that cannot be reconciled with the
    original's dtype and shape is left out; NCHWc-blocked tensors are read through ORT's own
    ReorderOutput (``onnx_dump_nchwc``).  Intermediate tensors ORT fused away (the DQ outputs, the
    float op outputs of a unit, a Conv's output before the BatchNormalization folded into it or the
    activation fused with it) do not exist on the device and are not in the dump."""
    from ..loaders.onnx_dump_io import optimized_with_outputs

    want, opt_bytes = runner.run(graph.path, _LEVELS["all"], feed, save_optimized=True)
    data, mapping = optimized_with_outputs(opt_bytes, graph.path, lambda t: _channels(graph, t))
    got, _ = runner.run(data, _LEVELS["disable"], feed)
    for k, v in want.items():
        if k not in got or not np.array_equal(np.asarray(got[k]), np.asarray(v), equal_nan=True):
            raise RefinterpError(f"onnxruntime: the optimized graph with every tensor exposed computes output "
                                 f"'{k}' differently from a plain session; no faithful capture at level all",
                                 graph.path)
    out = {n: feed[n] for n in graph.inputs}
    for o, (target, nhwc) in mapping.items():
        v = _reconcile(np.asarray(got[o]), graph.tensors.get(target), nhwc)
        if v is not None:
            out.setdefault(target, v)
    return {n: out[n] for n in _order(graph) if n in out}


def _channels(graph: Graph, name: str) -> int | None:
    info = graph.tensors.get(name)
    shape = info.shape if info is not None else None
    return shape[1] if shape is not None and len(shape) >= 3 and shape[1] else None


def _reconcile(v: np.ndarray, info, channels_last: bool) -> np.ndarray | None:
    """ORT's storage of a tensor -> the original model's: int8 re-encoded as uint8 (codes + 128, exact),
    channels-last layout (N, spatial..., C) -> (N, C, spatial...).  None when the result does not have
    the original tensor's dtype and (known dimensions of its) shape."""
    if info is None:
        return None
    if info.dtype == "int8" and v.dtype == np.uint8:
        v = (v.astype(np.int16) - 128).astype(np.int8)
    if channels_last:
        if v.ndim < 3:
            return None
        v = np.ascontiguousarray(np.moveaxis(v, -1, 1))
    if str(v.dtype) != info.dtype:
        return None
    if info.shape is not None and (len(info.shape) != v.ndim or
                                   any(d is not None and d != e for d, e in zip(info.shape, v.shape))):
        return None
    return v


def capture(graph: Graph, runtime: str, samples: list[dict[str, np.ndarray]],
            ort_opt_level: str = "all", htp_arch: str = "73", arch: str = "x86_64",
            arm_core: str = "a76", notes: list[str] | None = None,
            htp_probes: int | None = None) -> list[dict[str, np.ndarray]]:
    """``arch`` (``capture_arm64.ARCHES``): x86_64 runs the runtime installed here; arm64 /
    arm64-tflite2.14 run the aarch64 wheels under qemu on the emulated ``arm_core``.  ``notes`` receives
    what the user should know about the capture (tensors left out and why).  ``htp_probes``: qnn-htp's budget of
    search sessions (capture_qnn.PROBES when None)."""
    from .capture_arm64 import ARCHES, EmulatedOrt, capture_litert_arm64
    from .capture_qnn import PROBES, capture_qnn_htp

    if runtime not in RUNTIMES:
        raise InputError(f"unknown runtime '{runtime}' (known: {', '.join(RUNTIMES)})")
    if arch not in ARCHES:
        raise InputError(f"unknown arch '{arch}' (known: {', '.join(ARCHES)})")
    arm = arch != "x86_64"
    if arm and runtime not in ("litert-ref", "litert-opt", "litert-xnnpack", "onnxruntime"):
        raise InputError(f"runtime '{runtime}' has no aarch64 build to emulate (--arch {arch}: litert-ref, "
                         f"litert-opt, litert-xnnpack, onnxruntime)")
    if arch == "arm64-tflite2.14" and runtime == "onnxruntime":
        raise InputError("--arch arm64-tflite2.14 is the old tflite-runtime package: LiteRT runtimes only")
    fmt_ok = graph.format == ("onnx" if runtime in ("onnxruntime", "qnn-htp") else "tflite")
    if not fmt_ok:
        raise InputError(f"runtime '{runtime}' cannot run a {graph.format} model", graph.path)
    out: list[dict[str, np.ndarray]] = []
    sessions: dict = {}
    for feed in samples:
        try:
            if runtime == "qnn-htp":
                out.append(capture_qnn_htp(graph, feed, htp_arch, sessions,
                                           PROBES if htp_probes is None else htp_probes))
            elif runtime == "onnxruntime":
                out.append(capture_onnxruntime(graph, feed, ort_opt_level, EmulatedOrt(arm_core) if arm else None))
            elif runtime == "tflm":
                out.append(capture_tflm(graph, feed))
            elif arm:
                out.append(capture_litert_arm64(graph, feed, runtime, arch, arm_core))
            else:
                out.append(capture_litert(graph, feed, runtime))
        except RefinterpError:
            raise
        except Exception as e:  # the runtime's own error types (shape/dtype mismatch, unsupported op)
            msg = " ".join(str(e).split())
            raise RefinterpError(f"{runtime} failed: {type(e).__name__}: {msg[:300]}", graph.path) from None
    if sessions.get("left_out") and notes is not None:
        notes.append(f"left out {len(sessions['left_out'])} tensor(s) whose exposure changes what the HTP computes "
                     f"(fused into their consumer on the device): {', '.join(sessions['left_out'])}")
    if sessions.get("unresolved") and notes is not None:
        notes.append(f"left out {len(sessions['unresolved'])} tensor(s) the search for such tensors did not clear "
                     f"within its {PROBES if htp_probes is None else htp_probes} emulator sessions (--htp-probes): "
                     f"{', '.join(sessions['unresolved'])}")
    return out
