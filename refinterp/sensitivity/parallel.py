"""Sensitivity tasks on worker processes: each spawned worker loads the model, builds the sessions and
its own Evaluator once, then scores the (node, mode) fallbacks it is sent.  Results are the same as
in one process (every task is deterministic and self-contained)."""
from __future__ import annotations

from typing import Any

from .engine import Evaluator

_EV: Evaluator | None = None


def _init(spec: dict[str, Any]) -> None:
    global _EV
    from .. import Session, load
    from ..settings import apply_numba_threads
    from .engine import reference_session

    apply_numba_threads()
    graph = load(spec["model"])
    reference = reference_session(graph, spec["against"])[0]
    _EV = Evaluator(Session(graph, spec["scheme"]), reference, spec["samples"], spec["metric"], spec["mode"],
                    spec["output_map"])


def _task(job):
    return _EV.task(job)


class WorkerPool:
    """``with WorkerPool(spec, n) as pool: analyse(..., mapper=pool.mapper)``.  ``spec``: model path,
    scheme (name or path), against ("float32" or a float model path), samples,
    metric, mode, output_map."""

    def __init__(self, spec: dict[str, Any], workers: int):
        self.spec, self.workers, self.pool = spec, workers, None

    def __enter__(self) -> "WorkerPool":
        from ..settings import spawn_pool

        self.pool = spawn_pool(self.workers, _init, (self.spec,))
        return self

    def __exit__(self, *exc) -> None:
        self.pool.terminate() if exc[0] else self.pool.close()
        self.pool.join()

    def mapper(self, _ev: Evaluator):
        def run(jobs):
            size = max(1, len(jobs) // (4 * self.workers))
            return self.pool.map(_task, jobs, chunksize=size)
        return run
