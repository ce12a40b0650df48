"""The diff itself: run the model under a scheme on the dump's inputs, compare every tensor, and
re-run every node on the device's own input tensors to separate its local error from the error it
inherited.

Reference ("accumulated") value of a tensor: the scheme's result when the whole model runs from the
inputs.  Local value: the scheme's result of the tensor's producing node fed with the *device's*
values of that node's inputs.  A node whose accumulated error fails the policy while its local error
passes only inherited the divergence.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..dumps.model import Dump
from ..errors import DumpError, RefinterpError
from ..ir import Graph, TensorInfo
from ..runtime import Session
from ..samples import feed_samples
from . import metrics as M
from .align import match_names
from .aligned import Alignment, Anchors, resolve_index_names
from .convert import is_int, lsb_error, same_quant, to_real, to_stored
from .policy import EXACT_OPS, Policy
from .result import DIVERGED, EXACT, MISSING, UNALIGNED, UNMODELLED, WITHIN, DiffResult, TensorResult
from .unwritten import unwritten_masks

Progress = Callable[[int, int], None]  # (done, total)


@dataclass
class _Acc:
    ref: list[np.ndarray] = field(default_factory=list)
    dev: list[np.ndarray] = field(default_factory=list)
    lsb: list[np.ndarray] = field(default_factory=list)
    eq: list[np.ndarray] = field(default_factory=list)

    def add(self, ref_stored, dev_stored, ref_qp, dev_qp, info: TensorInfo | None, skip=None) -> None:
        if skip is not None and skip.size == np.size(ref_stored) == np.size(dev_stored):
            keep = ~skip  # elements the runtime does not write (compare/unwritten.py)
            ref_stored, dev_stored = np.ravel(ref_stored)[keep], np.ravel(dev_stored)[keep]
        r, d = to_real(ref_stored, ref_qp), to_real(dev_stored, dev_qp)
        codes = (is_int(ref_stored) and is_int(dev_stored) and
                 (ref_qp is None or dev_qp is None or same_quant(ref_qp, dev_qp)))
        self.ref.append(r)
        self.dev.append(d)
        self.eq.append(ref_stored.astype(np.int64) == dev_stored.astype(np.int64) if codes else
                       (r == d) | (np.isnan(r) & np.isnan(d)))
        if info is not None and info.quant is not None and np.dtype(info.dtype).kind in "iu":
            self.lsb.append(lsb_error(ref_stored, dev_stored, r, d, codes, info.quant))

    def metrics(self) -> M.Metrics | None:
        if not self.ref:
            return None
        return M.compute(self.ref, self.dev, self.lsb if self.lsb else None, self.eq)


def _stamp(session: Session) -> dict[str, Any]:
    d = session.scheme.data
    return {"name": session.scheme.name, "backend": session.scheme.describes.strip(),
            "backend_version": d.get("backend_version"), "status": d.get("status"), "path": session.scheme.path}


def _input_target(info: TensorInfo, arr: np.ndarray) -> tuple[int, ...]:
    shape = info.shape or arr.shape
    if any(d is None or d < 0 for d in shape) and arr.ndim == len(shape):
        return tuple(int(a if d is None or d < 0 else d) for d, a in zip(shape, arr.shape))
    return tuple(int(1 if d is None or d < 0 else d) for d in shape)


class _Tally:
    """Per-tensor accumulators (whole-model and local re-run) and the progress count."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0
        self.acc: dict[str, _Acc] = {}
        self.loc: dict[str, _Acc] = {}
        self.local_fail: dict[str, str] = {}

    def tick(self, force: bool) -> None:
        self.done += 1
        if self.progress and (force or self.done == self.total):
            self.progress(self.done, self.total)


class Differ:
    def __init__(self, graph: Graph, scheme: str = "float32", policy: Policy | None = None,
                 mapping: dict[str, str | None] | None = None) -> None:
        self.graph = graph
        self.session = Session(graph, scheme, unmodelled=True)
        self.policy = policy or Policy()
        self.mapping = mapping
        self.keep_reference = False  # keep every sample's reference tensors (for exports)
        self.explain = False  # also run ``--explain`` (compare.explain); its object is kept in ``explanation``
        self.explanation = None
        self._outputs = {st.node.name: [o for o in st.node.outputs if o] for st in self.session.steps}
        # stub output -> the scheme's refusal of its (unmodelled) producer
        self._anchored = {o: why for n, why in self.session.unmodelled.items() for o in self._outputs[n]}
        self._refused_runs: dict[str, list] = {}  # output -> [the kernel's run-time refusal, samples refused]
        self._not_computed: dict[str, str] = {}  # output -> why the run could not compute it (set by run)
        self.reference_samples: list[dict[str, np.ndarray]] = []
        self.unwritten = unwritten_masks(graph)  # elements the runtime leaves as the arena held them

    def _order(self) -> list[str]:
        """Every value tensor in execution order (resource / variant handles hold no values)."""
        seen, out = set(), []
        for n in list(self.graph.inputs) + [o for nd in self.graph.nodes for o in nd.outputs if o]:
            info = self.graph.tensors.get(n)
            if info is not None and info.dtype in ("resource", "variant"):
                continue
            if n not in seen:
                seen.add(n)
                out.append(n)
        return out

    def run(self, dump: Dump, feeds: Mapping[str, np.ndarray] | None = None,
            progress: Progress | None = None) -> DiffResult:
        """Match the dump's tensors to the model's, choose the input samples, then per sample run
        the model (accumulated error) and re-run each node on the device's inputs (local error)."""
        order = self._order()
        self._refused_runs, self._not_computed = {}, {}
        al = Alignment(self.graph, dump, self._match(dump, order))
        for name in self.graph.inputs:
            if name in al.nm.pairs:
                al.align(name, _input_target(self.graph.tensors[name], al.dump_tensor(name).data))
        al.dev_qp = {m: dump.tensors[d].effective_quant() for m, (d, _) in al.nm.pairs.items()}
        samples, notes, input_checks = self._samples(al, feeds)
        tally = _Tally(progress, len(samples) * (len(self.session.steps) + 1))
        for si, feed in enumerate(samples):
            self._compare_run(si, feed, order, al, tally)
            self._compare_local(si, al, tally)
        return self._report(dump, order, al, tally, samples, notes, input_checks)

    # -- the steps of ``run`` ------------------------------------------------------------------
    def _match(self, dump: Dump, order: list[str]):
        resolve_index_names(dump, self.graph)
        src = {n: t.source_name for n, t in self.graph.tensors.items() if t.source_name}
        nm = match_names(order, dump.names(), self.mapping, src)
        if not nm.pairs:
            raise DumpError(f"no tensor of the dump matches a model tensor (dump has {len(dump.tensors)}: "
                            f"{', '.join(dump.names()[:5])}...); pass --mapping", dump.path)
        return nm

    def _samples(self, al: "Alignment", feeds) -> tuple[list[dict[str, np.ndarray]], list[str], list]:
        """The input samples: the dump's own model inputs, or ``feeds`` (then checked against the
        dump's inputs for layout / range / colour-order mistakes)."""
        g = self.graph
        if feeds is None:
            missing = [n for n in g.inputs if n not in al.aligned]
            if missing:
                raise DumpError(f"the dump lacks model input '{missing[0]}'; pass --inputs", al.dump.path)
            k = min(len(al.aligned[n]) for n in g.inputs)
            samples = [{n: to_stored(al.aligned[n][i], al.dev_qp[n], g.tensors[n]) for n in g.inputs}
                       for i in range(k)]
            return samples, ["model inputs taken from the dump"], []
        from .inputs_check import check_inputs

        samples = feed_samples(g, feeds)
        return samples, [], check_inputs(g, samples, al.aligned, al.dev_qp, self.policy)

    def _compare_run(self, si: int, feed, order: list[str], al: "Alignment", tally: "_Tally") -> None:
        """Run the whole model on sample ``si`` and accumulate reference vs device per tensor."""
        ref = self.session.run(feed, capture="all", anchors=Anchors(al, si))
        refused = {o: why for n, why in self.session.refused_when_run.items() for o in self._outputs[n]}
        for o, why in refused.items():  # anchored on the device's value in this sample: not compared
            self._refused_runs.setdefault(o, [why, 0])[1] += 1
        for n, why in self.session.not_computed.items():  # no value computed (the device's, where it has one)
            for o in self._outputs[n]:
                self._not_computed.setdefault(o, why)
                refused.setdefault(o, why)  # not compared in this sample
        if self.keep_reference:
            self.reference_samples.append(ref)
        if si == 0:  # tensors whose shape only the run tells
            for name in order:
                if name in al.nm.pairs and name not in al.aligned and name not in al.unaligned and name in ref:
                    al.align(name, tuple(np.shape(ref[name])))
        tally.tick(force=True)
        for name in order:
            dv = al.device(name, si)
            if dv is not None and name in ref and name not in self._anchored and name not in refused:
                tally.acc.setdefault(name, _Acc()).add(np.asarray(ref[name]), dv, *al.params(name, dv),
                                                       skip=self.unwritten.get(name))

    def _compare_local(self, si: int, al: "Alignment", tally: "_Tally") -> None:
        """Re-run every node whose outputs the dump has on the device's own input tensors."""
        sess = self.session
        for idx, st in enumerate(sess.steps):
            tally.tick(force=idx % 16 == 0)
            outs = [o for o in st.node.outputs if al.device(o, si) is not None]
            if not outs or st.node.name in sess.unmodelled:
                continue
            args = al.device_inputs(st.node, si)
            if args is None:
                continue
            try:
                res = sess.run_node(idx, args)
            except (RefinterpError, ValueError, IndexError, TypeError) as e:
                for o in outs:
                    tally.local_fail[o] = f"local re-run failed: {e}"
                continue
            for o, v in zip(st.node.outputs, res):
                if o in outs and v is not None:
                    dv = al.device(o, si)
                    tally.loc.setdefault(o, _Acc()).add(np.asarray(v), dv, *al.params(o, dv),
                                                        skip=self.unwritten.get(o))

    def _report(self, dump: Dump, order, al: "Alignment", tally: "_Tally", samples, notes,
                input_checks) -> DiffResult:
        from .. import __version__

        g = self.graph
        producers = g.producer()
        tensors = [self._result(name, producers.get(name), al.nm, tally.acc, tally.loc, al.aligned,
                                al.unaligned, al.notes, tally.local_fail) for name in order]
        for name in al.nm.ambiguous:
            notes.append(f"ambiguous name match for '{name}' (several candidates); use --mapping")
        un = self.session.unmodelled
        if un:
            notes.append(f"{len(un)} node(s) not modelled under {self.session.scheme.name} ({', '.join(list(un)[:4])}"
                         f"{' ...' if len(un) > 4 else ''}): not compared; the nodes after them ran on the "
                         f"device's values where the dump has them")
        lost = sorted({o for o in self._not_computed if o not in self._anchored})
        if lost:
            notes.append(f"{len(lost)} tensor(s) not computed (after a node not modelled whose output the dump "
                         f"lacks): {', '.join(lost[:4])}{' ...' if len(lost) > 4 else ''}")
        explained = None
        if self.explain:
            from .explain import explain

            self.explanation = explain(self, al.aligned, al.dev_qp, len(samples), input_checks)
            explained = self.explanation.to_json()
            for tr in tensors:
                tr.explanation = self.explanation.per_tensor.get(tr.name)
        return DiffResult(
            model=g.path, model_format=g.format, scheme=_stamp(self.session), refinterp_version=__version__,
            dump={"path": dump.path, "format": dump.format, "tensors": len(dump.tensors),
                  "matched": len(al.nm.pairs)},
            num_samples=len(samples), policy=self.policy.describe(), tensors=tensors,
            dump_only=al.nm.dump_only, ambiguous=al.nm.ambiguous, input_checks=input_checks, notes=notes,
            explanation=explained)

    # -- verdicts ---------------------------------------------------------------------------
    def _verdict(self, name: str, info: TensorInfo | None, a: _Acc, m: M.Metrics,
                 exact_expected: bool) -> tuple[str, dict[str, Any]]:
        if m.exact_fraction == 1.0 and not m.nonfinite_mismatch:
            return EXACT, {}
        if exact_expected:
            return DIVERGED, {"expect": "exact"}
        if info is not None and info.quant is not None and np.dtype(info.dtype).kind in "iu":
            tol = self.policy.lsb_for(name)
            # 1e-3 LSB slack: LSB errors of dequantized float values carry float32 rounding
            ok = m.max_abs_lsb is not None and m.max_abs_lsb <= tol + 1e-3 and not m.nonfinite_mismatch
            return (WITHIN if ok else DIVERGED), {"atol_lsb": tol}
        if info is not None and np.dtype(info.dtype).kind in "iub":
            return DIVERGED, {"expect": "exact"}
        atol, rtol = self.policy.float_for(name)
        return (WITHIN if M.within(m, atol, rtol, a.ref, a.dev) else DIVERGED), {"atol": atol, "rtol": rtol}

    def _result(self, name, node, nm, acc, loc, aligned, unaligned, align_notes, local_fail) -> TensorResult:
        g = self.graph
        info = g.tensors.get(name)
        q = info.quant if info is not None else None
        tr = TensorResult(
            name=name, op=node.op if node is not None else "Input", node=node.name if node is not None else None,
            index=node.index if node is not None else None, status=MISSING,
            dtype=info.dtype if info is not None else "", quantized=q is not None,
            shape=[int(d) if d is not None else -1 for d in info.shape] if info is not None and info.shape else None,
            scale=float(q.scale.ravel()[0]) if q is not None else None,
            zero_point=int(q.zero_point.ravel()[0]) if q is not None else None,
            tensor_index=info.index if info is not None else None)
        if name in nm.pairs:
            tr.dump_name, tr.match = nm.pairs[name]
        tr.notes = list(align_notes.get(name, []))
        if name in unaligned:
            tr.status = UNALIGNED
            return tr
        refusal = self._anchored.get(name)
        if refusal is not None:
            tr.status = UNMODELLED
            tr.notes.append(f"not modelled under {self.session.scheme.name} ({refusal}); " +
                            ("the dump has no value of it, so the nodes reading it were not computed"
                             if name in self._not_computed else "the nodes after it ran on the device's values of "
                             "this tensor"))
            return tr
        a = acc.get(name)
        if a is None and name in self._not_computed:
            tr.status = UNMODELLED
            tr.notes.append(f"not computed: {self._not_computed[name]}")
            return tr
        refused = self._refused_runs.get(name)
        if refused is not None:
            why, k = refused
            tr.notes.append(f"its node refused its inputs when run on {k} sample(s) ({why}); the nodes after it "
                            "ran on the device's values there" + ("" if a is None else ", the others are compared"))
            if a is None:
                tr.status = UNMODELLED
                return tr
        if a is None:
            return tr
        tr.metrics = a.metrics()
        tr.status, tr.tolerance = self._verdict(name, info, a, tr.metrics, False)
        if node is not None and node.op in EXACT_OPS and node.inputs:
            i0 = g.tensors.get(node.inputs[0])
            if i0 is not None and same_quant(i0.quant, q):
                tr.local_expect = "exact"
        la = loc.get(name)
        if la is not None:
            tr.local = la.metrics()
            tr.local_status, _ = self._verdict(name, info, la, tr.local, tr.local_expect == "exact")
        elif name in local_fail:
            tr.notes.append(local_fail[name])
        return tr
