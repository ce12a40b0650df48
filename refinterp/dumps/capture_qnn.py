"""``refinterp capture --runtime qnn-htp``: Qualcomm's HTP, as its x86-64 host emulation runs it.

The ``onnxruntime-qnn`` package (a plugin execution provider for ONNX Runtime) ships the x86-64 build
of ``libQnnHtp.so``, which emulates the Hexagon Tensor Processor on the host.  A QDQ model runs with
the CPU fallback disabled, so every node runs on the (emulated) HTP or the session is refused.

Which tensors: the outputs of every QuantizeLinear node (the quantized activations, the tensors
that exist on the device) and the graph's inputs and outputs.  Exposing them as graph outputs must
not change what the HTP computes -- the HTP fuses some ops into their producer (v73 Conv + HardSwish)
unless the producer's output is needed.  On the first sample the tensors whose exposure moves another
exposed tensor are found (capture_qnn_taps.py) and left out of the capture (they do not exist on the
device as deployed), and named; on every sample the final outputs are compared with those of a session
on the unmodified model, and where they still differ the tensors that make the difference are found by
bisection and left out too.

This is Qualcomm's emulation of the HTP (``htp_arch`` 68, 69, 73, 75, 79, 81), not a phone: a dump
from the device itself (``qnn-net-run --debug``) remains the final word.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import numpy as np

from ..errors import InputError, RefinterpError
from ..ir import Graph
from .capture import RuntimeMissing
from .capture_qnn_taps import perturbing_taps

HTP_ARCHS = ("68", "69", "73", "75", "79", "81")
PINNED = "onnxruntime-qnn==2.7.0 with onnxruntime==1.32.0"


def _qnn():
    try:
        import onnxruntime as ort
        import onnxruntime_qnn as oq
    except ImportError:
        raise RuntimeMissing(f"the QNN HTP emulator is not installed (pip install {PINNED})") from None
    name = oq.get_ep_name()
    if not any(d.ep_name == name for d in ort.get_ep_devices()):
        ort.register_execution_provider_library(name, oq.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == name]
    if not devices:
        raise RuntimeMissing("onnxruntime-qnn is installed but offers no QNN device on this machine")
    return ort, oq, devices


@contextlib.contextmanager
def _quiet_stdout():
    """The HTP library prints a configuration notice on file descriptor 1 when it loads; keep it out of
    our output (which may be a JSON report)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def htp_session(model: bytes | str, htp_arch: str = "73"):
    """An ONNX Runtime session on the emulated HTP (QNN EP, HTP backend), CPU fallback disabled."""
    if str(htp_arch) not in HTP_ARCHS:
        raise InputError(f"htp_arch {htp_arch} is not one of {', '.join(HTP_ARCHS)}")
    ort, oq, devices = _qnn()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    so.add_provider_for_devices(devices, {"backend_path": oq.get_qnn_htp_path(), "htp_arch": str(htp_arch)})
    with _quiet_stdout():
        return ort.InferenceSession(model, so)


def _tapped_session(graph: Graph, taps: tuple[str, ...], htp_arch: str, cache: dict):
    from ..loaders.onnx_dump_io import model_with_all_outputs

    if ("tapped", taps) not in cache:
        data, _ = model_with_all_outputs(graph.path, only=frozenset(taps))
        cache["tapped", taps] = htp_session(data, htp_arch)
    return cache["tapped", taps]


def _values(graph, taps, feed, htp_arch, cache, probe: bool = False) -> dict[str, np.ndarray]:
    """The outputs of the session exposing ``taps``.  ``probe``: a session of the search for taps to leave out,
    not kept (each holds its own copy of the model)."""
    sess = _tapped_session(graph, taps, htp_arch, cache)
    names = [o.name for o in sess.get_outputs()]
    got = dict(zip(names, sess.run(names, feed)))
    if probe:
        del cache["tapped", taps]
    return got


def _faithful(got: dict, want: dict) -> dict[str, np.ndarray] | None:
    """``got`` (a tapped session's outputs), or None when its final outputs differ from ``want`` (the plain
    session's)."""
    for o, v in want.items():
        if not np.array_equal(np.asarray(got.get(o)), np.asarray(v), equal_nan=True):
            return None
    return got


def _run_tapped(graph, taps, feed, want: dict, htp_arch, cache, probe: bool = False) -> dict[str, np.ndarray] | None:
    return _faithful(_values(graph, taps, feed, htp_arch, cache, probe), want)


def _faithful_taps(graph, taps: tuple[str, ...], feed, want: dict, htp_arch, cache) -> tuple[str, ...]:
    """``taps`` less those whose exposure changes what the HTP computes (the HTP fuses some ops into their
    producer -- v73 Conv + HardSwish -- unless the producer's output is needed; measured): each found as the
    last of the shortest failing prefix, by bisection (about log2(len(taps)) sessions per tap left out, each
    dropped once run: the sessions of a large model take gigabytes together)."""
    kept = list(taps)
    while _run_tapped(graph, tuple(kept), feed, want, htp_arch, cache) is None:
        del cache["tapped", tuple(kept)]  # not faithful: not run again (the faithful one is, on every sample)
        if not kept:  # the graph outputs alone differ from the plain session: not the taps
            raise RefinterpError("qnn-htp: the emulator gives this model's outputs differently from run to run; no "
                                 "faithful capture", graph.path)
        lo, hi = 0, len(kept)  # the first lo taps are faithful, the first hi are not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _run_tapped(graph, tuple(kept[:mid]), feed, want, htp_arch, cache, probe=True) is None:
                hi = mid
            else:
                lo = mid
        cache.setdefault("left_out", []).append(kept.pop(hi - 1))
    return tuple(kept)


PROBES = 48  # the default budget of the tap search's emulator sessions (capture_qnn_taps.py)


def capture_qnn_htp(graph: Graph, feed: dict[str, np.ndarray], htp_arch: str = "73",
                    _sessions: dict | None = None, probes: int | None = PROBES) -> dict[str, Any]:
    """A QuantizeLinear output whose exposure would change the HTP's result is left out of the capture and
    named in ``_sessions["left_out"]``; ``probes``: at most that many sessions search for them (None: no bound),
    the taps left unresolved are left out too and named in ``_sessions["unresolved"]``."""
    feed = {k: np.asarray(v) for k, v in feed.items()}
    cache = _sessions if _sessions is not None else {}
    if "plain" not in cache:
        cache["taps"] = tuple(n.outputs[0] for n in graph.nodes if n.op == "QuantizeLinear" and n.outputs)
        try:
            cache["plain"] = htp_session(graph.path, htp_arch)
            _tapped_session(graph, cache["taps"], htp_arch, cache)
        except RefinterpError:
            raise
        except Exception as e:  # ORT's own errors: an op the HTP does not take, a QOperator model...
            msg = " ".join(str(e).split())
            raise RefinterpError(f"qnn-htp refused the model (the QNN EP takes QDQ models whose every op runs on "
                                 f"the HTP): {msg[:300]}", graph.path) from None
    plain = cache["plain"]
    want = dict(zip([o.name for o in plain.get_outputs()], plain.run(None, feed)))  # once per sample
    full = None  # this sample's run of the session exposing every tap, when that is the capture's session
    if "searched" not in cache:  # the taps whose exposure moves another tensor, on the first sample
        cache["searched"] = True
        full = _values(graph, cache["taps"], feed, htp_arch, cache)
        bad, unresolved = perturbing_taps(graph, cache["taps"],
                                          lambda taps: _values(graph, taps, feed, htp_arch, cache, True), full, probes)
        cache["unresolved"] = unresolved
        if bad or unresolved:
            del cache["tapped", cache["taps"]]
            gone = set(bad) | set(unresolved)
            cache["taps"] = tuple(t for t in cache["taps"] if t not in gone)
            cache.setdefault("left_out", []).extend(bad)
            full = None
    got = _faithful(full, want) if full is not None else _run_tapped(graph, cache["taps"], feed, want, htp_arch, cache)
    if got is None:
        cache["taps"] = _faithful_taps(graph, cache["taps"], feed, want, htp_arch, cache)
        got = _run_tapped(graph, cache["taps"], feed, want, htp_arch, cache)
    out = {n: feed[n] for n in graph.inputs if n in feed}
    out.update({n: np.asarray(v) for n, v in got.items()})
    order = list(graph.inputs) + [o for nd in graph.nodes for o in nd.outputs if o]
    return {n: out[n] for n in dict.fromkeys(order) if n in out}
