"""``make``: one golden case per node of a model, from one refinterp run under a scheme.

Each case holds the node's inputs exactly as the node received them in the run (integer codes for
quantized tensors, constants included), its outputs, and, for Conv/DepthwiseConv/FullyConnected/
BatchMatMul, the recomputed accumulator (see accum.py) when it requantizes back to the output.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from .. import __version__
from ..errors import GoldenError
from ..ir import Graph
from ..runtime import Session
from .accum import accumulators, store_dtype
from .case import (FORMAT_NAME, FORMAT_VERSION, INDEX_FILE, Case, case_folder_name, prepare_out_dir,
                   tensor_spec, to_jsonable, write_case)
from .plan_json import plan_to_json


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _op_filter(ops: Iterable[str] | None):
    if not ops:
        return lambda node: True
    want = {o.strip().upper() for o in ops if o.strip()}
    return lambda node: node.op.upper() in want or (node.source_op or "").upper() in want


def _scheme_meta(session: Session, step) -> dict[str, Any]:
    sch = session.scheme
    return {"name": sch.name, "backend": sch.describes, "backend_version": sch.data.get("backend_version"),
            "status": sch.data.get("status"), "variant": step.kernel.variant,
            "settings": to_jsonable(step.settings)}


def make_cases(graph: Graph, scheme: Any, feeds: Mapping[str, np.ndarray], *, ops: Iterable[str] | None = None,
               source: Mapping[str, Any] | None = None, generator: str = "refinterp golden make",
               extra: Mapping[str, Any] | None = None, start_index: int = 0) -> list[Case]:
    """Cases for every node (or the nodes whose op / source op is in ``ops``), in execution order.

    ``source``: provenance of the model (``{"path", "sha256"}``); ``extra``: merged into every case's
    provenance (a sweep records its axes there).  Case names are ``<index>_<op>_<node>``.
    """
    sess = Session(graph, scheme)
    g = sess.graph
    trace = sess.run(feeds, capture="all")
    keep = _op_filter(ops)
    cases: list[Case] = []
    for idx, st in enumerate(sess.steps):
        node = st.node
        if not keep(node):
            continue
        infos = [g.tensors.get(n) if n else None for n in node.inputs]
        vals = [None if not n else (trace[n] if n in trace else g.tensors[n].const) for n in node.inputs]
        outs = [trace[o] for o in node.outputs if o]
        arrays: dict[str, np.ndarray] = {}
        ins_spec, outs_spec = [], []
        for k, (info, v) in enumerate(zip(infos, vals)):
            ins_spec.append(tensor_spec(str(k), info, v))
            if v is not None:
                arrays[f"input.{k}"] = np.asarray(v)
        for k, (name, v) in enumerate(zip([o for o in node.outputs if o], outs)):
            outs_spec.append(tensor_spec(str(k), g.tensors[name], v))
            arrays[f"output.{k}"] = np.asarray(v)
        plan_json, plan_arrays = plan_to_json(st.plan)
        arrays.update(plan_arrays)
        acc_specs, notes = _accumulator(node, infos, vals, st, outs, arrays)
        label = node.source_op or node.op
        name = case_folder_name(start_index + idx, label, node.name)
        prov: dict[str, Any] = {"generator": generator, "refinterp_version": __version__,
                                "source_model": dict(source) if source else None, "verified_against": None,
                                "bit_exact": None}
        prov.update(extra or {})
        meta = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "name": name, "op": node.op,
                "source_op": node.source_op, "node": node.name, "node_index": idx, "model_format": g.format,
                "attrs": to_jsonable(node.attrs), "inputs": ins_spec, "outputs": outs_spec,
                "accumulators": acc_specs, "scheme": _scheme_meta(sess, st), "plan": plan_json,
                "provenance": prov}
        if notes:
            meta["notes"] = notes
        cases.append(Case(meta, arrays))
    return cases


def _accumulator(node, infos, vals, st, outs, arrays) -> tuple[list[dict[str, Any]], list[str]]:
    try:
        acc = accumulators(node, infos, vals)
    except (ValueError, IndexError, TypeError) as e:
        return [], [f"accumulator not recorded: {e}"]
    if acc is None:
        return [], []
    stored = store_dtype(acc, st.plan)
    rq = getattr(st.plan, "requant", None)
    if rq is not None and outs:
        try:
            back = rq(stored.astype(np.int64))
            ok = back.shape == outs[0].shape or back.size == outs[0].size
            ok = ok and np.array_equal(back.reshape(outs[0].shape), outs[0])
        except (ValueError, TypeError):
            ok = False
        if not ok:
            return [], ["accumulator not recorded: the recomputed accumulator does not requantize to the "
                        "output with this plan"]
    arrays["acc.0"] = stored
    return [{"key": "0", "dtype": stored.dtype.name, "shape": list(stored.shape),
             "meaning": "bias + sum((x - zx) * (w - zw)) before requantization"
                        + (", wrapped to int32" if stored.dtype == np.int32 else ", int64")}], []


def write_cases(out: str | Path, cases: list[Case], overwrite: bool = False) -> Path:
    """Write cases under ``out`` (refusing a non-empty folder unless ``overwrite``) and an index.json."""
    root = prepare_out_dir(out, overwrite)
    index = []
    seen: set[str] = set()
    for c in cases:
        name = c.meta["name"]
        if name in seen:
            raise GoldenError(f"two cases named '{name}'", str(root))
        seen.add(name)
        write_case(root / name, c)
        prov = c.meta["provenance"]
        index.append({"case": name, "op": c.meta["op"], "source_op": c.meta.get("source_op"),
                      "node": c.meta["node"], "bit_exact": prov.get("bit_exact"),
                      "verified_against": prov.get("verified_against")})
    tmp = root / f".{INDEX_FILE}.tmp"
    tmp.write_text(json.dumps({"format": FORMAT_NAME, "version": FORMAT_VERSION, "cases": index}, indent=1) + "\n")
    tmp.replace(root / INDEX_FILE)
    return root
