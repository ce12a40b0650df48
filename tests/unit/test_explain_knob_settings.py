"""--explain tries other backends' kernels on an unexplained node with the node's own settings: a kernel
must not read a setting it does not declare (the Session's check would stop the whole diff)."""
from __future__ import annotations

from pathlib import Path

import refinterp
from refinterp.compare.explain_candidates import knob_candidates, with_node_override
from refinterp.errors import RefinterpError
from refinterp.schemes.loader import load_scheme

DEMO = Path(__file__).resolve().parents[2] / "refinterp" / "models" / "demo_int8.tflite"


def test_every_knob_candidate_of_every_node_prepares_or_refuses():
    from refinterp.scheme_check import load_checked

    builtins = [load_checked(n) for n in ("tflite-optimized-arm64-2.14", "glow-cpu", "vitis-dpu", "tvm-qnn",
                                          "glow-interpreter", "onnxruntime-cpu")]
    scheme = load_scheme("tflite-optimized-arm64-2.14")
    sess = refinterp.Session(refinterp.load(DEMO), scheme)
    tried = 0
    for i, step in enumerate(sess.steps):
        for _label, over in knob_candidates(sess, i, scheme, builtins):
            try:
                sess.prepare_node(i, with_node_override(scheme, step.node.name, over))
            except RefinterpError:
                pass  # a refusal is fine; a RuntimeError (undeclared setting) is the bug
            tried += 1
    assert tried > 100
