"""ONNX control flow (If, Loop, Scan) and TFLite's (IF, WHILE): subgraphs run as child Sessions under the parent's scheme.

The runtime (not the kernel registry) prepares these nodes, because their bodies are whole graphs
resolved under the session's scheme: a quantized body (e.g. an LSTM exported as Scan over
QuantizeLinear / MatMulInteger) runs the same integer kernels as the rest of the model.  Values the
body reads from the enclosing graph (ONNX outer-scope references) become extra inputs of the node
("implicit inputs", as ONNX Runtime calls them), so they stay alive until the node runs.

Semantics (ONNX operator spec):

* If: the ``then_branch`` or ``else_branch`` outputs, by the scalar boolean condition.
* Loop (opset 11+ form): inputs ``M`` (max trip count, optional), ``cond`` (optional), then N
  loop-carried values; the body takes (iteration number int64 scalar, condition, N values) and returns
  (condition, N values, K scan outputs); outputs: the N final values, then the K scan outputs stacked
  along a new first axis (empty along it when the loop runs zero times).
* Scan (opset 9+): N state inputs then ``num_scan_inputs`` sequences sliced along
  ``scan_input_axes`` (reversed where ``scan_input_directions`` is 1); the body returns N states and
  K slices, stacked along ``scan_output_axes`` (reversed where ``scan_output_directions`` is 1).
  Opset 8 (``batch_major`` set by the loader): an optional ``sequence_lens`` input, then states and
  sequences that all carry a batch axis 0; each batch row is scanned on its own (axis 1,
  ``directions``) for its ``sequence_lens`` steps and the results stacked over the batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .errors import ModelError, UnsupportedOpError
from .ir import Graph, Node

CONTROL_OPS = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",),
               "While": ("cond", "body")}
_MAX_WHILE = 10_000_000  # iterations before a While is taken for a runaway loop


def free_names(g: Graph) -> list[str]:
    """Names a (sub)graph reads that it neither defines nor receives: its outer-scope references,
    including those of its own nested subgraphs, in first-use order."""
    defined = set(g.inputs) | {n for n, t in g.tensors.items() if t.const is not None}
    out: list[str] = []
    for node in g.nodes:
        reads = list(node.inputs)
        for attr in node.attrs.values():
            for sub in (attr if isinstance(attr, list) else [attr]):
                if isinstance(sub, Graph):
                    reads += free_names(sub)
        for name in reads:
            if name and name not in defined and name not in out:
                out.append(name)
        defined.update(o for o in node.outputs if o)
    return out


@dataclass(frozen=True)
class ControlPlan:
    op: str
    sessions: dict[str, Any]  # attribute name -> child Session
    implicit: tuple[str, ...]  # outer-scope names, appended to the node's inputs
    n_explicit: int  # the node's own inputs
    attrs: dict

    def describe(self) -> dict:
        return {"subgraphs": {k: f"{len(s.steps)} nodes" for k, s in self.sessions.items()},
                "implicit_inputs": list(self.implicit)}


def prepare_control(node: Node, graph: Graph, make_session: Callable[[Graph], Any]) -> tuple[Node, ControlPlan]:
    """(the node with its implicit inputs appended, its plan).  ``make_session(subgraph)`` builds a
    child Session under the parent's scheme."""
    subs = {}
    for key in CONTROL_OPS[node.op]:
        g = node.attrs.get(key)
        if not isinstance(g, Graph):
            raise ModelError(f"node '{node.name}' ({node.op}): attribute '{key}' is not a graph")
        subs[key] = g
    implicit: list[str] = []
    for g in subs.values():
        for name in free_names(g):
            if name not in implicit:
                implicit.append(name)
    sessions = {}
    for key, g in subs.items():
        outer = {n: graph.tensors[n] for n in implicit if n in graph.tensors and n not in g.tensors}
        sessions[key] = make_session(g.replace(tensors={**outer, **g.tensors}, path=graph.path))
    attrs = {k: v for k, v in node.attrs.items() if not isinstance(v, (Graph, list)) or
             (isinstance(v, list) and not any(isinstance(x, Graph) for x in v))}
    if node.op == "Scan" and not attrs.get("batch_major") and "num_scan_inputs" not in attrs:
        raise ModelError(f"node '{node.name}' (Scan): attribute 'num_scan_inputs' is missing")
    plan = ControlPlan(node.op, sessions, tuple(implicit), len(node.inputs), attrs)
    return Node(node.name, node.op, list(node.inputs) + implicit, list(node.outputs), node.attrs,
                node.source_op, node.index), plan


def _outer(plan: ControlPlan, args) -> dict[str, np.ndarray]:
    return {n: v for n, v in zip(plan.implicit, args[plan.n_explicit:]) if v is not None}


def _body(sess, values: dict[str, np.ndarray], outer: dict[str, np.ndarray]) -> list[np.ndarray]:
    got = sess.run_values({**outer, **values})
    return [got[o] for o in sess.graph.outputs]


def _scalar_bool(v, what: str) -> bool:
    a = np.asarray(v)
    if a.size != 1:
        raise ModelError(f"{what} must hold one value, got shape {list(a.shape)}")
    return bool(a.reshape(-1)[0])


def run_if(plan: ControlPlan, cond, *args):
    branch = "then_branch" if _scalar_bool(cond, "If condition") else "else_branch"
    sess = plan.sessions[branch]
    # TFLite IF (``branch_inputs``): the node's inputs after the condition feed the branch's inputs
    values = dict(zip(sess.graph.inputs, args[:plan.n_explicit - 1])) if plan.attrs.get("branch_inputs") else {}
    return tuple(_body(sess, values, _outer(plan, (cond,) + args)))


def run_while(plan: ControlPlan, *args):
    """TFLite WHILE: ``cond(values)`` (one boolean) then ``values = body(values)`` until false; the
    outputs are the final values (shapes may change from one iteration to the next)."""
    cond, body = plan.sessions["cond"], plan.sessions["body"]
    values = list(args[:plan.n_explicit])
    outer = _outer(plan, args)
    for sess in (cond, body):
        if len(sess.graph.inputs) != len(values):
            raise ModelError(f"While {'condition' if sess is cond else 'body'} takes {len(sess.graph.inputs)} "
                             f"inputs, the node has {len(values)}")
    for _ in range(_MAX_WHILE):
        if not _scalar_bool(_body(cond, dict(zip(cond.graph.inputs, values)), outer)[0], "While condition"):
            return tuple(values)
        values = _body(body, dict(zip(body.graph.inputs, values)), outer)
    raise ModelError(f"While loop still running after {_MAX_WHILE} iterations")


def _empty_like_output(sess, k: int) -> np.ndarray:
    info = sess.graph.tensors.get(sess.graph.outputs[k])
    dt = np.dtype(info.dtype) if info is not None and info.dtype else np.dtype(np.float32)
    shape = [0] + [d if isinstance(d, int) and d >= 0 else 0 for d in (info.shape or ())] if info else [0]
    return np.zeros(shape, dt)


def run_loop(plan: ControlPlan, m=None, cond=None, *rest):
    sess = plan.sessions["body"]
    n_carried = plan.n_explicit - 2
    carried = list(rest[:n_carried])
    outer = _outer(plan, (m, cond) + rest)
    body_in = sess.graph.inputs
    if len(body_in) != 2 + n_carried:
        raise ModelError(f"Loop body takes {len(body_in)} inputs, expected {2 + n_carried}")
    trips = None if m is None or np.asarray(m).size == 0 else int(np.asarray(m).reshape(-1)[0])
    go = True if cond is None or np.asarray(cond).size == 0 else _scalar_bool(cond, "Loop condition")
    scans: list[list[np.ndarray]] = []
    i = 0
    while go and (trips is None or i < trips):
        feeds = {body_in[0]: np.array(i, np.int64), body_in[1]: np.array(go, np.bool_)}
        feeds.update({name: v for name, v in zip(body_in[2:], carried)})
        out = _body(sess, feeds, outer)
        go = _scalar_bool(out[0], "Loop body condition")
        carried = out[1:1 + n_carried]
        scans.append(out[1 + n_carried:])
        i += 1
        if trips is None and cond is None:
            raise ModelError("Loop without a trip count or a condition never ends")
    n_scan = len(sess.graph.outputs) - 1 - n_carried
    stacked = [np.stack([s[k] for s in scans]) if scans else _empty_like_output(sess, 1 + n_carried + k)
               for k in range(n_scan)]
    return tuple(carried) + tuple(stacked)


def _scan_steps(sess, states, seqs, in_axes, in_dirs, n_scan_out, out_axes, out_dirs, outer):
    body_in = sess.graph.inputs
    length = seqs[0].shape[in_axes[0]] if seqs else 0
    for s, ax in zip(seqs, in_axes):
        if s.shape[ax] != length:
            raise ModelError(f"Scan inputs have different sequence lengths ({s.shape[ax]} and {length})")
    slices: list[list[np.ndarray]] = [[] for _ in range(n_scan_out)]
    for t in range(length):
        feeds = {name: v for name, v in zip(body_in, states)}
        for j, (s, ax, d) in enumerate(zip(seqs, in_axes, in_dirs)):
            feeds[body_in[len(states) + j]] = np.take(s, length - 1 - t if d else t, axis=ax)
        out = _body(sess, feeds, outer)
        states = out[:len(states)]
        for k in range(n_scan_out):
            slices[k].append(out[len(states) + k])
    outs = []
    for k in range(n_scan_out):
        seq = slices[k][::-1] if out_dirs[k] else slices[k]
        if seq:
            outs.append(np.stack(seq, axis=out_axes[k]))
        else:
            outs.append(_empty_like_output(sess, len(states) + k))
    return list(states), outs


def _axes(attrs, key: str, n: int, rank_of) -> list[int]:
    vals = list(attrs.get(key) or [0] * n)
    if len(vals) != n:
        raise ModelError(f"Scan attribute '{key}' has {len(vals)} entries, expected {n}")
    return [int(a) % rank_of(i) if rank_of(i) else int(a) for i, a in enumerate(vals)]


def run_scan(plan: ControlPlan, *args):
    sess = plan.sessions["body"]
    a = plan.attrs
    explicit = list(args[:plan.n_explicit])
    outer = _outer(plan, args)
    n_out_body = len(sess.graph.outputs)
    if a.get("batch_major"):
        return _run_scan8(plan, sess, explicit, outer)
    n_in = int(a["num_scan_inputs"])
    n_state = len(explicit) - n_in
    states, seqs = explicit[:n_state], [np.asarray(s) for s in explicit[n_state:]]
    n_scan_out = n_out_body - n_state
    in_axes = _axes(a, "scan_input_axes", n_in, lambda i: seqs[i].ndim)
    in_dirs = [int(d) for d in (a.get("scan_input_directions") or [0] * n_in)]
    out_axes = [int(x) for x in (a.get("scan_output_axes") or [0] * n_scan_out)]
    out_dirs = [int(d) for d in (a.get("scan_output_directions") or [0] * n_scan_out)]
    states, outs = _scan_steps(sess, states, seqs, in_axes, in_dirs, n_scan_out, [0] * n_scan_out,
                               out_dirs, outer)
    fixed = []
    for k, o in enumerate(outs):
        ax = out_axes[k] % o.ndim if o.ndim else 0
        fixed.append(np.moveaxis(o, 0, ax) if ax else o)
    return tuple(states) + tuple(fixed)


def _run_scan8(plan, sess, explicit, outer):
    """Opset-8 Scan: batch axis 0 on every state and sequence, optional ``sequence_lens``."""
    a = plan.attrs
    lens = explicit[0]
    rest = explicit[1:]
    n_in = int(a["num_scan_inputs"])
    n_state = len(rest) - n_in
    states, seqs = [np.asarray(s) for s in rest[:n_state]], [np.asarray(s) for s in rest[n_state:]]
    batch = (seqs[0] if seqs else states[0]).shape[0]
    dirs = [int(d) for d in (a.get("directions") or [0] * n_in)]
    n_scan_out = len(sess.graph.outputs) - n_state
    per_b = []
    for b in range(batch):
        n_t = seqs[0].shape[1] if lens is None or np.asarray(lens).size == 0 else int(np.asarray(lens)[b])
        if n_t != seqs[0].shape[1]:
            raise UnsupportedOpError("opset-8 Scan with sequence_lens shorter than the sequences is not supported")
        st, outs = _scan_steps(sess, [s[b] for s in states], [s[b] for s in seqs], [0] * n_in, dirs,
                               n_scan_out, [0] * n_scan_out, [0] * n_scan_out, outer)
        per_b.append((st, outs))
    states_out = [np.stack([p[0][k] for p in per_b]) for k in range(n_state)]
    scans_out = [np.stack([p[1][k] for p in per_b]) for k in range(n_scan_out)]
    return tuple(states_out) + tuple(scans_out)


RUNNERS = {"If": run_if, "Loop": run_loop, "Scan": run_scan, "While": run_while}
