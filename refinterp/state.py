"""TFLite resource variables (streaming state): VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, CALL_ONCE.

The variables live in the Session (``SessionState``), not in kernels or modules, and carry from one
``run`` to the next exactly as LiteRT's interpreter keeps them:

* ``VarHandle`` yields the variable's key, ``container/shared_name`` (LiteRT resolves handles with
  the same names to the same resource, across subgraphs);
* ``AssignVariable(handle, value)`` stores a copy of ``value`` (any dtype and shape: the converter
  keeps float state in a quantized model by DEQUANTIZE / QUANTIZE around it);
* ``ReadVariable(handle)`` returns the stored value (reading a variable never assigned is an error,
  as in LiteRT);
* ``CallOnce`` runs its initialisation subgraph the first time the Session runs (and again after
  ``Session.reset_state()``), sharing the same variables.

The Session runs these nodes itself (like ONNX control flow): they read and write Session state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .errors import ModelError
from .ir import Graph, Node

STATE_OPS = ("VarHandle", "ReadVariable", "AssignVariable", "CallOnce")


@dataclass
class SessionState:
    variables: dict[str, np.ndarray] = field(default_factory=dict)
    initialised: set[int] = field(default_factory=set)  # CALL_ONCE subgraphs already run
    # TFLite variable tensors (LSTM states): zeros before the first run, then the last run's values
    tensors: dict[str, np.ndarray] = field(default_factory=dict)

    def reset(self) -> None:
        self.variables.clear()
        self.initialised.clear()
        self.tensors.clear()


@dataclass(frozen=True)
class StatePlan:
    op: str
    state: SessionState
    key: str = ""  # VarHandle
    init: Any = None  # CallOnce: the child Session of the initialisation subgraph
    init_index: int = 0

    def describe(self) -> dict:
        return {"variable": self.key} if self.op == "VarHandle" else (
            {"init_subgraph": self.init_index} if self.op == "CallOnce" else {})


def prepare_state(node: Node, graph: Graph, state: SessionState,
                  make_session: Callable[[Graph], Any]) -> StatePlan:
    arity = {"VarHandle": (0, 1), "ReadVariable": (1, 1), "AssignVariable": (2, 0), "CallOnce": (0, 0)}
    n_in, n_out = arity.get(node.op, (None, None))
    if n_in is not None and (len([i for i in node.inputs if i]) < n_in or len(node.outputs) < n_out):
        raise ModelError(f"node '{node.name}' ({node.source_op or node.op}) needs {n_in} input(s) and "
                         f"{n_out} output(s), has {len(node.inputs)} and {len(node.outputs)}", graph.path)
    if node.op == "VarHandle":
        return StatePlan(node.op, state, key=f"{node.attrs.get('container', '')}/{node.attrs.get('shared_name', '')}")
    if node.op == "CallOnce":
        idx = int(node.attrs.get("init_subgraph_index", 0))
        sub = graph.subgraphs.get(str(idx))
        if sub is None:
            raise ModelError(f"node '{node.name}' (CALL_ONCE) refers to subgraph {idx}, which the model lacks",
                             graph.path)
        return StatePlan(node.op, state, init=make_session(sub.replace(subgraphs=graph.subgraphs)), init_index=idx)
    return StatePlan(node.op, state)


def _key(handle) -> str:
    a = np.asarray(handle)
    if a.dtype != object or a.size != 1:
        raise ModelError("a variable handle input is not the output of a VAR_HANDLE")
    return str(a.reshape(-1)[0])


def run_state(plan: StatePlan, *args):
    st = plan.state
    if plan.op == "VarHandle":
        return np.array(plan.key, dtype=object)
    if plan.op == "ReadVariable":
        key = _key(args[0])
        if key not in st.variables:
            raise ModelError(f"variable '{key}' is read before it was assigned")
        return st.variables[key].copy()
    if plan.op == "AssignVariable":
        st.variables[_key(args[0])] = np.array(args[1], copy=True)
        return ()
    if plan.init_index not in st.initialised:  # CallOnce
        plan.init.run_values({})
        st.initialised.add(plan.init_index)
    return ()
