"""``refinterp run --inputs`` with many samples: a batched .npz (one extra leading axis per input) or a
folder of .npz files, run on worker processes (spawn; BLAS / Numba pinned to one thread each).

Determinism: every sample is run by one ``Session.run`` whose result does not depend on the process
or thread that runs it; the outputs are written per sample and stacked in sample order by the
parent, so the bytes are the same whatever the worker count.  Nothing but sample indices and paths
crosses the process boundary: workers read their inputs from the source file(s) and write their
outputs as .npy files (``allow_pickle=False``) into a scratch folder.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError


@dataclass(frozen=True)
class BatchSource:
    """``kind`` 'npz' (arrays with a leading sample axis) or 'dir' (``files``: one .npz per sample)."""

    kind: str
    path: str
    count: int
    files: tuple[str, ...] = ()


def detect(path: str, graph) -> BatchSource | None:
    """The batch behind ``--inputs PATH``, or None when it holds a single sample."""
    from .common import load_npz

    p = Path(path)
    if p.is_dir():
        files = tuple(sorted(str(f) for f in p.iterdir() if f.suffix == ".npz" and f.is_file()))
        if not files:
            raise InputError("folder holds no .npz file", path)
        return BatchSource("dir", path, len(files), files)
    feeds = _named(load_npz(path), graph)
    counts = set()
    for name, a in feeds.items():
        info = graph.tensors.get(name)
        if info is None or info.shape is None or np.ndim(a) != len(info.shape) + 1:
            return None
        counts.add(int(np.shape(a)[0]))
    if len(counts) != 1:
        raise InputError(f"batched inputs disagree on the number of samples ({sorted(counts)})", path)
    return BatchSource("npz", path, counts.pop())


def _named(feeds: dict, graph) -> dict:
    if len(graph.inputs) == 1 and len(feeds) == 1 and graph.inputs[0] not in feeds:
        return {graph.inputs[0]: next(iter(feeds.values()))}
    return feeds


class _Worker:
    """Per-process state: the session, the source and where results go."""

    def __init__(self, model: str, scheme: str, src: BatchSource, scratch: str, dump: str | None,
                 overwrite: bool, session=None, graph=None):
        from .. import Session, load
        from .common import load_npz

        self.graph = graph if session is not None else load(model)
        self.session = session if session is not None else Session(self.graph, scheme=scheme)
        self.src, self.scratch, self.dump, self.overwrite = src, Path(scratch), dump, overwrite
        self.batch = _named(load_npz(src.path), self.graph) if src.kind == "npz" else None

    def feeds(self, k: int) -> dict:
        from .common import load_npz

        if self.batch is not None:
            return {name: a[k] for name, a in self.batch.items()}
        return _named(load_npz(self.src.files[k]), self.graph)

    def run(self, start: int, stop: int) -> int:
        from ..dumps.npydir import write_npy_dump

        for k in range(start, stop):
            try:
                result = self.session.run(self.feeds(k), capture="all" if self.dump else None)
            except InputError as e:
                where = self.src.files[k] if self.src.kind == "dir" else f"{self.src.path} sample {k}"
                raise InputError(str(e), where) from None
            for j, name in enumerate(self.graph.outputs):
                np.save(self.scratch / f"{k}_{j}.npy", np.asarray(result[name]), allow_pickle=False)
            if self.dump:
                write_npy_dump(Path(self.dump) / f"sample_{k}", result, self.graph, self.session.scheme.name,
                               overwrite=self.overwrite)
        return stop - start


_STATE: _Worker | None = None


def _init(*args) -> None:
    global _STATE
    from ..settings import apply_numba_threads

    apply_numba_threads()
    _STATE = _Worker(*args)


def _run_chunk(span: tuple[int, int]) -> int:
    return _STATE.run(*span)


def _chunks(n: int, workers: int) -> list[tuple[int, int]]:
    size = max(1, min(32, math.ceil(n / (workers * 4))))
    return [(s, min(n, s + size)) for s in range(0, n, size)]


def run_batch(model: str, scheme: str, src: BatchSource, graph, *, workers: int, dump: str | None,
              overwrite: bool, progress: bool, session=None) -> tuple[dict[str, np.ndarray], float]:
    """Run every sample; returns (outputs stacked on a leading sample axis, wall seconds).
    ``session``: an already prepared Session, used when ``workers <= 1``."""
    n = src.count
    scratch = tempfile.mkdtemp(prefix="refinterp-batch-")
    args = (model, scheme, src, scratch, dump, overwrite)
    spans = _chunks(n, workers)
    t0 = time.perf_counter()
    try:
        with _progress(progress, n) as advance:
            if workers <= 1:
                w = _Worker(*args, session=session, graph=graph)
                for span in spans:
                    advance(w.run(*span))
            else:
                pool = _spawn_pool(workers, args)
                try:
                    for done in pool.imap_unordered(_run_chunk, spans):
                        advance(done)
                finally:
                    pool.close()
                    pool.join()
        wall = time.perf_counter() - t0
        outs = {}
        for j, name in enumerate(graph.outputs):
            outs[name] = np.stack([np.load(Path(scratch) / f"{k}_{j}.npy", allow_pickle=False) for k in range(n)])
        return outs, wall
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _spawn_pool(workers: int, args):
    from ..settings import spawn_pool

    return spawn_pool(workers, _init, args)


class _progress:
    """A rich progress bar on stderr showing samples/s (a no-op when ``enabled`` is false)."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total = enabled, total

    def __enter__(self):
        if not self.enabled:
            return lambda k: None
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.bar = Progress(TextColumn("samples"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                            console=Console(stderr=True))
        self.bar.__enter__()
        self.task = self.bar.add_task("run", total=self.total, rate="")
        self.t0, self.done = time.perf_counter(), 0

        def advance(k: int) -> None:
            self.done += k
            dt = max(time.perf_counter() - self.t0, 1e-9)
            self.bar.update(self.task, advance=k, rate=f"{self.done / dt:.1f} samples/s")
        return advance

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.__exit__(*exc)
        return False
