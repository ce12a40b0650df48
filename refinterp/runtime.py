"""Session: resolve a Graph under a scheme once into a list of steps, then run it many times."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from . import kernels as _kernels  # noqa: F401  (registers every kernel module)
from .errors import InputError, RefinterpError
from .ir import Graph, Node, TensorInfo, dequantize
from .kernels.fused import apply_activation
from .kernels.registry import Kernel, PrepareContext, lookup
from .schemes import Scheme, load_scheme

Hook = Callable[[Node, dict[str, np.ndarray]], None]


@dataclass
class Step:
    node: Node
    kernel: Kernel
    plan: Any
    settings: dict[str, Any]
    dequant: tuple[bool, ...]  # per input: dequantize stored integers before the kernel (float compute)
    activation: str | None  # fused activation applied after a float kernel


class Session:
    """Prepare once, run many.

    ``Session(model, scheme="float32")`` resolves every node to a kernel variant and a plan.
    ``run(feeds)`` returns ``{output name: array}``; ``run(feeds, capture="all")`` every tensor
    (graph inputs and every node output, in execution order); ``capture=[names]`` those plus the
    outputs.
    """

    def __init__(self, model: Graph | str, scheme: str | Scheme = "float32") -> None:
        if isinstance(model, str):
            from .loaders import load

            model = load(model)
        self.graph: Graph = model
        self.scheme: Scheme = scheme if isinstance(scheme, Scheme) else load_scheme(scheme)
        self.steps: list[Step] = [self._resolve(n) for n in self.graph.nodes]
        self._last_use = self._compute_last_use()
        self.timings: dict[str, float] = {}

    # -- preparation -------------------------------------------------------------------------
    def _info(self, name: str) -> TensorInfo | None:
        return self.graph.tensors.get(name) if name else None

    def _resolve(self, node: Node) -> Step:
        choice = self.scheme.for_node(node, self.graph)
        k = lookup(node.op, choice.variants, node=node, fmt=self.graph.format)
        ins = [self._info(i) for i in node.inputs]
        outs = [self.graph.tensors[o] for o in node.outputs if o]
        ctx = PrepareContext(node, ins, outs, dict(choice.settings))
        try:
            plan = k.prepare(node, ctx)
        except RefinterpError:
            raise
        except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as e:
            raise RefinterpError(f"cannot prepare node '{node.name}' ({node.source_op or node.op}): {e}",
                                 self.graph.path) from e
        float_kernel = k.variant == "float"
        dq = tuple(bool(float_kernel and not k.raw_inputs and t is not None and t.quant is not None
                        and np.dtype(t.dtype).kind in "iu") for t in ins)
        act = node.attrs.get("activation") if float_kernel else None
        return Step(node, k, plan, ctx.settings, dq, act)

    def _compute_last_use(self) -> dict[str, int]:
        last: dict[str, int] = {}
        for i, st in enumerate(self.steps):
            for name in st.node.inputs:
                if name:
                    last[name] = i
        for o in self.graph.outputs:
            last[o] = len(self.steps)
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
            want = np.dtype(info.dtype)
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
            hook: Hook | None = None, timing: bool = False) -> dict[str, np.ndarray]:
        values = self.check_feeds(feeds)
        keep_all = capture == "all"
        keep = set(self.graph.outputs) | (set() if capture in (None, "all") else set(capture))
        result: dict[str, np.ndarray] = {}
        if keep_all:
            result.update(values)
        for name in keep & values.keys():
            result[name] = values[name]
        consts = self.graph.tensors
        for idx, st in enumerate(self.steps):
            args = []
            for j, name in enumerate(st.node.inputs):
                if not name:
                    args.append(None)
                    continue
                v = values.get(name)
                if v is None:
                    info = consts.get(name)
                    if info is None or info.const is None:
                        raise RefinterpError(f"tensor '{name}' needed by node '{st.node.name}' "
                                             f"has no value", self.graph.path)
                    v = info.const
                if st.dequant[j] and v.dtype.kind in "iu":
                    v = dequantize(v, consts[name].quant)
                args.append(v)
            t0 = time.perf_counter() if timing else 0.0
            outs = st.kernel.run(st.plan, *args)
            if not isinstance(outs, (tuple, list)):
                outs = (outs,)
            if st.activation:
                outs = tuple(apply_activation(o, st.activation) for o in outs)
            if timing:
                self.timings[st.node.name] = self.timings.get(st.node.name, 0.0) + time.perf_counter() - t0
            produced = {}
            for name, v in zip(st.node.outputs, outs):
                if name:
                    produced[name] = np.asarray(v)
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
        missing = [o for o in self.graph.outputs if o not in result]
        for o in missing:  # outputs that are graph inputs or constants
            if o in values:
                result[o] = values[o]
            elif consts.get(o) is not None and consts[o].const is not None:
                result[o] = consts[o].const
        return result


def _fmt_shape(shape) -> str:
    if shape is None:
        return "[?]"
    return "[" + ", ".join("?" if d is None or (isinstance(d, int) and d < 0) else str(d) for d in shape) + "]"
