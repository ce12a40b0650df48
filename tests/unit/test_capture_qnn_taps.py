"""The search for the QuantizeLinear outputs whose exposure moves another tensor (refinterp/dumps/capture_qnn_taps.py),
on a small QDQ chain with a simulated device: no emulator needed."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import refinterp
from refinterp.dumps.capture_qnn_taps import _groups, perturbing_taps, witnesses
from tests.onnx_models import single_node_model


def _chain(tmp_path):
    """x -> Q0 -> Relu -> Q1 -> Sigmoid -> Q2 -> Tanh -> Q3, and Q1 -> Abs -> Q4 (a branch)."""
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(128, np.uint8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q0"])]
    prev = "q0"
    for k, op in enumerate(["Relu", "Sigmoid", "Tanh"], start=1):
        nodes += [helper.make_node("DequantizeLinear", [prev, "s", "z"], [f"d{k}"]),
                  helper.make_node(op, [f"d{k}"], [f"f{k}"]),
                  helper.make_node("QuantizeLinear", [f"f{k}", "s", "z"], [f"q{k}"])]
        prev = f"q{k}"
    nodes += [helper.make_node("DequantizeLinear", ["q1", "s", "z"], ["d4"]), helper.make_node("Abs", ["d4"], ["f4"]),
              helper.make_node("QuantizeLinear", ["f4", "s", "z"], ["q4"])]
    m = single_node_model(nodes, {"x": np.zeros(4, np.float32)}, {"q3": TensorProto.UINT8, "q4": TensorProto.UINT8},
                          opset=17, ir_version=8, inits=inits)
    p = tmp_path / "chain.onnx"
    onnx.save(m, str(p))
    return refinterp.load(str(p))


def _device(runs: list):
    """A simulated device where exposing q1 changes q2 (its consumer fuses otherwise) and nothing else; each run's
    exposed taps are appended to ``runs``."""
    def run(exposed):
        runs.append(exposed)
        values = {t: np.full(4, 7) for t in exposed}
        if "q2" in exposed:
            values["q2"] = np.full(4, 8 if "q1" in exposed else 9)
        return values
    return run


def test_witnesses_are_the_next_taps_downstream(tmp_path):
    graph = _chain(tmp_path)
    taps = ("q0", "q1", "q2", "q3", "q4")
    wit = witnesses(graph, taps)
    assert wit == {"q0": {"q1"}, "q1": {"q2", "q4"}, "q2": {"q3"}, "q3": set(), "q4": set()}
    groups = _groups(taps, wit)
    assert sorted(t for g in groups for t in g) == ["q0", "q1", "q2"]  # the taps with witnesses, once each
    for g in groups:  # no group holds a tap and one of its witnesses
        assert not any(w in g for t in g for w in wit[t])


def test_a_tap_that_moves_only_its_witness_is_found(tmp_path):
    """A simulated device where exposing q1 changes q2 (its consumer fuses otherwise) but no graph output: the
    search names q1 and nothing else, whatever else is hidden."""
    graph = _chain(tmp_path)
    taps = ("q0", "q1", "q2", "q3", "q4")
    runs = []
    run = _device(runs)
    full = run(taps)
    assert perturbing_taps(graph, taps, run, full) == (["q1"], [])
    assert len(runs) <= 6  # one session per group, and a few to single the tap out


def test_a_refused_probe_is_split_and_a_refused_single_tap_stays(tmp_path):
    """The QNN EP refuses some exposure patterns (a MatMul unassigned): such a probe is halved, and a tap whose own
    probe is refused is kept rather than guessed."""
    graph = _chain(tmp_path)
    taps = ("q0", "q1", "q2", "q3", "q4")

    def run(exposed):
        if "q0" not in exposed:
            raise RuntimeError("the EP leaves a node unassigned")
        values = {t: np.full(4, 7) for t in exposed}
        if "q2" in exposed:
            values["q2"] = np.full(4, 8 if "q1" in exposed else 9)
        return values

    assert perturbing_taps(graph, taps, run, run(taps)) == (["q1"], [])


def test_a_budget_of_probes_leaves_the_unresolved_taps_out(tmp_path):
    """With too few probes the taps not yet cleared are returned as unresolved (the capture leaves them out: fewer
    tensors, none that the exposure moved); the groups are probed breadth first, so the first probes clear whole
    groups; with a budget of 0 every tap with a witness is unresolved."""
    graph = _chain(tmp_path)
    taps = ("q0", "q1", "q2", "q3", "q4")
    runs = []
    run = _device(runs)
    full = run(taps)
    groups = _groups(taps, witnesses(graph, taps))
    unbounded, _ = perturbing_taps(graph, taps, run, full)
    needed = len(runs) - 1
    for budget in range(needed):
        runs.clear()
        found, unresolved = perturbing_taps(graph, taps, run, full, budget)
        assert len(runs) == budget and unresolved  # the search stopped within its budget
        assert "q1" in found + unresolved  # the perturbing tap is never kept
        assert set(found + unresolved) <= {"q0", "q1", "q2"}
    assert perturbing_taps(graph, taps, run, full, 0) == ([], [t for g in groups for t in g])
    assert perturbing_taps(graph, taps, run, full, needed) == (unbounded, [])
