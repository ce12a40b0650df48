"""Session: resolve a Graph under a scheme once into a list of steps, then run it many times."""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from . import kernels as _kernels  # noqa: F401  (registers every kernel module)
from .errors import InputError, ModelError, RefinterpError, ResourceError, UnsupportedOpError
from .ir import Graph, Node, TensorInfo, dequantize, storage_dtype
from .kernels.float.fused import apply_activation
from .kernels.registry import (Kernel, PrepareContext, SettingsView, check_settings_read, is_plan, lookup,
                               resolve_delegate)
from .scheme_check import check_scheme, load_checked
from .schemes import Scheme
from .control_flow import CONTROL_OPS, RUNNERS, prepare_control
from .state import STATE_OPS, SessionState, prepare_state, run_state
from .settings import run_pools
from . import unmodelled as _stub

Hook = Callable[[Node, dict[str, np.ndarray]], None]


@dataclass
class Step:
    node: Node
    kernel: Kernel
    plan: Any
    settings: dict[str, Any]
    dequant: tuple[bool, ...]  # per input: dequantize stored integers before the kernel (float compute)
    activation: str | None  # fused activation applied after a float kernel
    # per output: quantize a float result to the output TensorInfo's params (``compute: float``
    # nodes of an integer scheme: a CPU float fallback between quantized tensors)
    quantize_out: tuple[bool, ...] = ()
    # per output: ``float_output: int16`` -- a float result rounded to a symmetric 16-bit grid over
    # the output tensor's quantized range (an estimate of 16-bit activations, used by sensitivity)
    grid16_out: tuple[bool, ...] = ()


class Session:
    """Prepare once, run many.

    ``Session(model, scheme="float32")`` resolves every node to a kernel variant and a plan.
    ``run(feeds)`` returns ``{output name: array}``; ``run(feeds, capture="all")`` every tensor
    (graph inputs and every node output, in execution order); ``capture=[names]`` those plus the
    outputs.  ``unmodelled=True``: nodes the scheme refuses become stubs (``self.unmodelled``) whose
    outputs ``run(..., anchors=...)`` takes as given (refinterp/unmodelled.py; ``diff`` gives the device's).
    """

    def __init__(self, model: Graph | str, scheme: str | Scheme = "float32", *, unmodelled: bool = False,
                 _state: SessionState | None = None) -> None:
        if isinstance(model, str):
            from .loaders import load

            model = load(model)
        self.graph: Graph = model
        # resource variables (TFLite streaming state): owned by this Session, shared with its subgraphs
        self._state = _state if _state is not None else SessionState()
        self.scheme: Scheme = check_scheme(scheme) if isinstance(scheme, Scheme) else load_checked(scheme)
        if self.scheme.data.get("graph_passes"):
            from .passes import apply_passes

            self.graph = apply_passes(self.graph, self.scheme.data["graph_passes"])
        # node name -> the scheme's refusal, for the stubs of ``unmodelled=True`` (refinterp/unmodelled.py)
        self.unmodelled: dict[str, str] = {}
        # the last ``run(..., anchors=...)``: node -> its kernel's refusal when run (data-dependent, e.g. a row the
        # HTP's arithmetic decides; its outputs taken from the anchors), and node -> why it was not computed
        # (an unmodelled node without anchored values, and the nodes after it)
        self.refused_when_run: dict[str, str] = {}
        self.not_computed: dict[str, str] = {}
        self.steps: list[Step] = [self._resolve_or_stub(n) if unmodelled else self._resolve(n)
                                  for n in self.graph.nodes]
        check_float_outputs(self.steps, self.graph)
        self._last_use = self._compute_last_use()
        self.timings: dict[str, float] = {}

    # -- preparation -------------------------------------------------------------------------
    def _info(self, name: str) -> TensorInfo | None:
        return self.graph.tensors.get(name) if name else None

    def _resolve_or_stub(self, node: Node) -> Step:
        try:
            return self._resolve(node)
        except UnsupportedOpError as e:
            self.unmodelled[node.name] = e.message
            return Step(node, _stub.stub_kernel(node), _stub.UnmodelledPlan(e.message), {},
                        (False,) * len(node.inputs), None)

    def _resolve(self, node: Node, scheme: Scheme | None = None) -> Step:
        if node.op in STATE_OPS:  # variables: Session state
            sch = scheme or self.scheme
            plan = prepare_state(node, self.graph, self._state, lambda g: Session(g, sch, _state=self._state))
            return Step(node, Kernel(node.op, "state", run_state), plan, {}, (False,) * len(node.inputs), None)
        if node.op in CONTROL_OPS:  # subgraphs: child Sessions under the same scheme
            sch = scheme or self.scheme
            full, plan = prepare_control(node, self.graph, lambda g: Session(g, sch))
            return Step(full, Kernel(node.op, "control", RUNNERS[node.op]), plan, {},
                        (False,) * len(full.inputs), None)
        choice = (scheme or self.scheme).for_node(node, self.graph)
        refused = choice.settings.get("refuse_dtypes")
        if refused and node.inputs and node.inputs[0]:
            dt = self._info(node.inputs[0]).dtype
            if dt in refused:
                raise UnsupportedOpError(f"node '{node.name}' ({node.source_op or node.op}, {dt}): {refused[dt]}",
                                         self.graph.path)
        k = lookup(node.op, choice.variants, node=node, fmt=self.graph.format)
        ins = [self._info(i) for i in node.inputs]
        outs = [self.graph.tensors[o] for o in node.outputs if o]
        view = SettingsView(choice.settings)
        ctx = PrepareContext(node, ins, outs, view)
        try:
            chain, plan = resolve_delegate(k, k.prepare(node, ctx))
            k = chain[-1]  # the node runs as the kernel it is handed to
            check_settings_read(view.read, chain)
            float_kernel = k.variant == "float"
            dq = tuple(bool(float_kernel and not k.raw_inputs and t is not None and t.quant is not None
                            and storage_dtype(t.dtype).kind in "iu") for t in ins)
            # float results bound for quantized integer tensors: quantized back (``compute: float``),
            # or left in float / put on a 16-bit grid (``float_output``)
            fo = ctx.settings.get("float_output")
            to_int = tuple(bool(float_kernel and ctx.settings.get("compute") == "float" and t.quant is not None
                                and storage_dtype(t.dtype).kind in "iu") for t in outs)
            qo = tuple(q and not fo for q in to_int)
            g16 = tuple(q and fo == "int16" for q in to_int)
        except RefinterpError:
            raise
        except MemoryError:  # e.g. a lookup table over a 32-bit type a hostile model declares
            raise ResourceError(f"node '{node.name}' ({node.source_op or node.op}) ran out of memory while "
                                f"preparing", self.graph.path) from None
        # AttributeError / OverflowError: a malformed model (a required input absent, no quantization
        # where the kernel needs it, an infinite scale); reported per node, never a traceback.
        except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError, AttributeError,
                OverflowError) as e:
            raise RefinterpError(f"cannot prepare node '{node.name}' ({node.source_op or node.op}): {e}",
                                 self.graph.path) from e
        if not is_plan(plan):  # a kernel-author error, not a model's: never reported as the model's fault
            raise RuntimeError(f"kernel ({k.op}, {k.variant}) prepared a {type(plan).__name__}, not a frozen "
                               f"dataclass plan")
        act = node.attrs.get("activation") if float_kernel else None
        return Step(node, k, plan, ctx.settings, dq, act, qo if any(qo) else (), g16 if any(g16) else ())

    def _compute_last_use(self) -> dict[str, int]:
        last: dict[str, int] = {}
        for i, st in enumerate(self.steps):
            for name in st.node.inputs:
                if name:
                    last[name] = i
        for o in self.graph.outputs:
            last[o] = len(self.steps)
        for update in (self.graph.metadata.get("variable_tensors") or {}).values():
            if update:  # a variable's new value is stored after the last step: keep it until then
                last[update] = len(self.steps)
        return last

    # -- execution ---------------------------------------------------------------------------
    def check_feeds(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        g = self.graph
        unknown = [k for k in feeds if k not in g.inputs]
        if unknown:
            raise InputError(f"unknown input '{unknown[0]}'; the model's inputs are: {', '.join(g.inputs)}",
                             g.path)
        out: dict[str, np.ndarray] = {}
        for name in g.inputs:
            info = g.tensors[name]
            if name not in feeds:
                raise InputError(f"missing input '{name}' (expected shape {_fmt_shape(info.shape)}, "
                                 f"dtype {info.dtype})", g.path)
            x = np.asarray(feeds[name])
            if x.dtype.name in ("int4", "uint4", "int2", "uint2"):  # ml_dtypes sub-byte arrays
                x = x.astype(storage_dtype(x.dtype.name))
            want = storage_dtype(info.dtype)
            if x.dtype != want:
                if x.dtype.kind == want.kind == "f" or (x.dtype.kind in "iu" and want.kind == "f"
                                                       and x.dtype.itemsize <= 2):
                    x = x.astype(want)
                else:
                    raise InputError(f"input '{name}' has dtype {x.dtype}; expected {want} "
                                     f"(shape {_fmt_shape(info.shape)})", g.path)
            if info.shape is not None and (len(info.shape) != x.ndim or any(
                    d is not None and d >= 0 and d != s for d, s in zip(info.shape, x.shape))):
                raise InputError(f"input '{name}' has shape {_fmt_shape(x.shape)}; expected "
                                 f"{_fmt_shape(info.shape)} ({want})", g.path)
            out[name] = x
        return out

    def run(self, feeds: Mapping[str, Any], capture: str | Iterable[str] | None = None,
            hook: Hook | None = None, timing: bool = False,
            anchors: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """``anchors``: values (stored form) for the outputs of the nodes this scheme does not model
        (``unmodelled=True``); the nodes after them run on these."""
        with run_pools():  # BLAS threads for refinterp's own calls only (settings.run_pools)
            return self._run_checked(self.check_feeds(feeds), capture, hook, timing, anchors)

    def run_values(self, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run on ready values (no feed checks), keyed by name: a control-flow body's inputs plus the
        outer-scope values it reads.  Returns ``{output name: array}``."""
        return self._run_checked(dict(values), None, None, False)

    def _run_checked(self, values, capture, hook, timing, anchors=None) -> dict[str, np.ndarray]:
        variables = self.graph.metadata.get("variable_tensors") or {}
        for var in variables:  # TFLite variable tensors: their value carried from the last run
            if var not in values:
                values[var] = self._state.tensors.get(var, None)
                if values[var] is None:  # LiteRT / TFLM reset a quantized variable to its zero point
                    info = self.graph.tensors[var]
                    zp = int(info.quant.zero_point.ravel()[0]) if info.quant is not None else 0
                    values[var] = np.full([d or 0 for d in (info.shape or ())], zp, np.dtype(info.dtype))
        keep_all = capture == "all"
        keep = set(self.graph.outputs) | (set() if capture in (None, "all") else set(capture))
        result: dict[str, np.ndarray] = {}
        if keep_all:
            result.update(values)
        for name in keep & values.keys():
            result[name] = values[name]
        lost: set[str] = set()  # with anchors: tensors left without a value (refinterp/unmodelled.py)
        if anchors is not None:
            self.refused_when_run, self.not_computed = {}, {}
        for idx, st in enumerate(self.steps):
            produced = (self._exec_on(st, values, timing) if anchors is None else
                        _stub.step_with_anchors(self, st, functools.partial(self._exec_on, st, values, timing),
                                                anchors, lost))
            values.update(produced)
            if keep_all:
                result.update(produced)
            else:
                for name in keep & produced.keys():
                    result[name] = produced[name]
            if hook is not None:
                hook(st.node, produced)
            if not keep_all:
                for name in st.node.inputs:
                    if name and self._last_use.get(name) == idx:
                        values.pop(name, None)
        if keep_all:  # a handle's tensor shows its variable's value after this run (not the handle)
            for st in self.steps:
                if st.node.op == "VarHandle":
                    value = self._state.variables.get(st.plan.key)
                    result.pop(st.node.outputs[0], None)
                    if value is not None:
                        result[st.node.outputs[0]] = value.copy()
        for var, update in variables.items():
            if update and update in values:
                self._state.tensors[var] = np.array(values[update])
                if keep_all or var in keep:  # a variable tensor shows its value after the run, as in LiteRT
                    result[var] = self._state.tensors[var].copy()
        consts = self.graph.tensors
        missing = [o for o in self.graph.outputs if o not in result]
        for o in missing:  # outputs that are graph inputs or constants
            if o in values:
                result[o] = values[o]
            elif consts.get(o) is not None and consts[o].const is not None:
                result[o] = consts[o].const
        return result

    def _arg(self, st: Step, j: int, name: str, values: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """Input ``j`` of a step: the computed value, else the constant; dequantized for float kernels."""
        if not name:
            return None
        v = values.get(name)
        if v is None:
            info = self.graph.tensors.get(name)
            if info is None or info.const is None:
                raise RefinterpError(f"tensor '{name}' needed by node '{st.node.name}' "
                                     f"has no value", self.graph.path)
            v = info.const
        if st.dequant[j] and v.dtype.kind in "iu":
            try:
                v = dequantize(v, self.graph.tensors[name].quant)
            except (ValueError, IndexError) as e:  # quantization axis/scales inconsistent with the value
                raise ModelError(f"tensor '{name}' (input of node '{st.node.name}') cannot be dequantized: {e}",
                                 self.graph.path) from None
        return v

    def _exec_on(self, st: Step, values: Mapping[str, np.ndarray], timing: bool) -> dict[str, np.ndarray]:
        return self._exec_step(st, [self._arg(st, j, name, values) for j, name in enumerate(st.node.inputs)], timing)

    def _exec_step(self, st: Step, args: list, timing: bool = False) -> dict[str, np.ndarray]:
        """Run one step's kernel (plus its fused activation) on ready arguments."""
        t0 = time.perf_counter() if timing else 0.0
        try:
            outs = st.kernel.run(st.plan, *args)
            if not isinstance(outs, (tuple, list)):
                outs = (outs,)
            if st.activation:
                outs = tuple(apply_activation(o, st.activation) for o in outs)
            if st.grid16_out:
                named = [o for o in st.node.outputs if o]
                outs = tuple(_on_int16_grid(o, self.graph.tensors[n]) if g else o
                             for o, n, g in zip(outs, named, st.grid16_out))
            if st.quantize_out:
                named = [o for o in st.node.outputs if o]
                outs = tuple(_quantize_output(o, self.graph.tensors[n]) if q else o
                             for o, n, q in zip(outs, named, st.quantize_out))
        except RefinterpError:
            raise
        except MemoryError:  # a hostile model: shapes that only a kernel can compute
            raise ResourceError(f"node '{st.node.name}' ({st.node.source_op or st.node.op}) ran out of memory",
                                self.graph.path) from None
        except (ValueError, IndexError, TypeError, KeyError, ZeroDivisionError, OverflowError, AttributeError) as e:
            first = (str(e).splitlines() or [""])[0][:200]
            raise ModelError(f"node '{st.node.name}' ({st.node.source_op or st.node.op}) failed on its inputs "
                             f"({type(e).__name__}: {first})", self.graph.path) from e
        if timing:
            self.timings[st.node.name] = self.timings.get(st.node.name, 0.0) + time.perf_counter() - t0
        return {name: np.asarray(v) for name, v in zip(st.node.outputs, outs) if name}

    def reset_state(self) -> None:
        """Forget every resource variable and re-arm CALL_ONCE initialisers (the next ``run`` starts
        as the first did), like LiteRT's ``Interpreter.reset_all_variables``."""
        self._state.reset()

    reset_all_variables = reset_state

    @property
    def variables(self) -> dict[str, np.ndarray]:
        """A copy of the resource variables, keyed ``container/shared_name``."""
        return {k: v.copy() for k, v in self._state.variables.items()}

    def step_of(self, node: str | int) -> Step:
        """The prepared step of a node, by execution index or node name."""
        if isinstance(node, (int, np.integer)):
            if not 0 <= int(node) < len(self.steps):
                raise InputError(f"node index {node} out of range (0..{len(self.steps) - 1})", self.graph.path)
            return self.steps[int(node)]
        st = next((s for s in self.steps if s.node.name == node), None)
        if st is None:
            raise InputError(f"no node named '{node}'", self.graph.path)
        return st

    def prepare_node(self, node: str | int, scheme: Scheme) -> Step:
        """A fresh step for one node of this session's graph resolved under another ``scheme`` (e.g.
        this one with a per-node override); the session's own steps are unchanged.  Run it with
        ``run_step``.  The other scheme's ``graph_passes`` are not applied."""
        return self._resolve(self.step_of(node).node, scheme)

    def run_step(self, st: Step, inputs: list) -> list[np.ndarray]:
        """``run_node`` for a step made by ``prepare_node``."""
        if len(inputs) > len(st.node.inputs):
            raise InputError(f"node '{st.node.name}' takes {len(st.node.inputs)} inputs, got {len(inputs)}",
                             self.graph.path)
        given = {name: np.asarray(v) for name, v in zip(st.node.inputs, inputs) if name and v is not None}
        with run_pools():
            produced = self._exec_step(st, [self._arg(st, j, name, given) for j, name in enumerate(st.node.inputs)])
        return [produced.get(o) if o else None for o in st.node.outputs]

    def run_node(self, node: str | int, inputs: list) -> list[np.ndarray]:
        """Run one node alone on the given input values (e.g. a device's own tensors).

        ``inputs[j]`` is the value of the node's input ``j``; ``None`` takes the model's constant
        (or leaves an absent optional input absent).  Values are given as stored (integer codes for
        quantized tensors); the step's plan, dequantization and fused activation apply exactly as in
        ``run``.  Returns one array per declared output (``None`` for unnamed outputs).
        """
        return self.run_step(self.step_of(node), inputs)


def check_float_outputs(steps: list[Step], graph: Graph) -> None:
    """``float_output`` leaves a quantized tensor in float32: every consumer must run a float kernel
    (an integer kernel would read floats as codes)."""
    floats = {o: st.node.name for st in steps if st.settings.get("float_output")
              and st.settings.get("compute") == "float" for o in st.node.outputs if o}
    if not floats:
        return
    for st in steps:
        for name in st.node.inputs:
            if name in floats and st.kernel.variant != "float":
                raise ModelError(f"node '{floats[name]}' has float_output, but its consumer '{st.node.name}' "
                                 f"({st.node.source_op or st.node.op}) runs an integer kernel: give it "
                                 f"compute: float too", graph.path)


def _on_int16_grid(v: np.ndarray, info: TensorInfo) -> np.ndarray:
    """float32 values rounded (half to even) to the grid s16 * k, |k| <= 32767, with s16 = the larger
    end of the tensor's quantized real range / 32767 (TFLite 16x8 activations: symmetric, zero point 0)."""
    v = np.asarray(v, np.float32)
    s, z = info.quant.broadcast(v.shape)
    ii = np.iinfo(storage_dtype(info.dtype))
    s = np.asarray(s, np.float64)
    z = np.asarray(z, np.float64)
    s16 = np.maximum(np.abs(s * (ii.min - z)), np.abs(s * (ii.max - z))) / 32767.0
    s16 = np.where(s16 > 0, s16, 1.0)
    k = np.clip(np.rint(v / s16), -32767, 32767)
    return (k * s16).astype(np.float32)


def _quantize_output(v: np.ndarray, info: TensorInfo) -> np.ndarray:
    v = np.asarray(v)
    if v.dtype.kind != "f":
        return v
    from .quant.affine import quantize_float

    s, z = info.quant.broadcast(v.shape)
    return quantize_float(v, s, z, info.dtype)


def _fmt_shape(shape) -> str:
    if shape is None:
        return "[?]"
    return "[" + ", ".join("?" if d is None or (isinstance(d, int) and d < 0) else str(d) for d in shape) + "]"
