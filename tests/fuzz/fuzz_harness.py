"""Shared machinery of the fuzz targets: byte mutations, the clean-failure check, time and memory guards.

Each target is a function ``check(example)`` that feeds one mutated file to a public reader and lets
only ``RefinterpError`` subclasses escape.  ``run_target`` drives it with hypothesis in rounds: round
``k`` is ``@seed(BASE_SEED + k)`` with ``EXAMPLES_PER_ROUND`` examples, so every round is reproducible
and the rounds run are a prefix of one fixed sequence; rounds stop once the target's time budget is
spent (at least one full round always runs).

Budget: ``REFINTERP_FUZZ_SECONDS`` (total over all targets, split by each target's weight) or the CI
default ``CI_SECONDS``.  A finding (an escaping non-refinterp exception or a hang) is saved as a file
under ``REFINTERP_FUZZ_FINDINGS`` (default: a temp folder) and fails the test.  In a long run
(``REFINTERP_FUZZ_KEEP_GOING=1``) rounds continue after a finding and every finding is listed at the end.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import signal
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from refinterp.errors import RefinterpError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
BASE_SEED = 20261121
EXAMPLES_PER_ROUND = 40
CI_SECONDS = 120.0  # default-suite total over every target (issue 9: >= 2 minutes)
TOTAL_WEIGHT = 120.0  # sum of every target's weight (WEIGHTS in test_fuzz_models.py and test_fuzz_files.py)
EXAMPLE_TIMEOUT = 20.0  # seconds; generous: a first numba compile of a kernel can take several
FUZZ_BUDGET = "256M"  # refinterp's --max-memory while fuzzing, so budget checks trigger cheaply
AS_HEADROOM = 3 << 30  # address-space cap above the process's current size: a missed check fails fast
INTERESTING_INTS = (0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000,
                    0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x40000000, 0xFFFFFFFE, 0xFFFFFFF0, 1 << 20)


# Findings in readers this fuzzing work does not own (being written by other developers) are reported to
# the lead instead of failing: an escaping exception whose innermost refinterp frame is in one of these
# modules is counted per (type, file:line), its first reproducer saved as ``open-<target>-<hash>``, and the
# list printed after each target.  Kept reproducers live in tests/fuzz/regressions/ (strict xfails in
# test_regressions.py).  Remove a prefix once its owner's readers pass the fuzz targets.
OPEN_MODULES: tuple[str, ...] = ()  # every reader now converts malformed input at its entry point
known_hits: dict[tuple[str, str], int] = {}
known_examples: dict[tuple[str, str], str] = {}


def signature(err: BaseException) -> tuple[str, str]:
    """(exception type name, innermost ``refinterp/...`` file:line of the traceback)."""
    inner = ""
    for fr in traceback.extract_tb(err.__traceback__):
        f = fr.filename.replace("\\", "/")
        if "/refinterp/" in f and "/tests/" not in f:
            inner = "refinterp/" + f.rsplit("/refinterp/", 1)[1] + f":{fr.lineno}"
    return type(err).__name__, inner


class Hang(BaseException):
    """Raised by the per-example alarm; a BaseException so no ``except Exception`` swallows it."""


class Finding(AssertionError):
    def __init__(self, message: str, target: str, files: dict[str, bytes], error: BaseException) -> None:
        super().__init__(message)
        self.target, self.files, self.error = target, files, error


# -- mutations ---------------------------------------------------------------------------------
_pos = st.integers(0, (1 << 31) - 1)
_region = st.sampled_from(("any", "head", "tail"))
mutation = st.one_of(
    st.tuples(st.just("flip"), _region, _pos, st.integers(0, 7)),
    st.tuples(st.just("byte"), _region, _pos, st.integers(0, 255)),
    st.tuples(st.just("u32"), _region, _pos, st.sampled_from(INTERESTING_INTS)),
    st.tuples(st.just("u32"), _region, _pos, st.integers(0, 0xFFFFFFFF)),
    st.tuples(st.just("truncate"), _region, _pos),
    st.tuples(st.just("delete"), _region, _pos, st.integers(1, 64)),
    st.tuples(st.just("insert"), _region, _pos, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("copy"), _region, _pos, _pos, st.integers(1, 64)),
)
mutations = st.lists(mutation, min_size=1, max_size=3)


def _where(region: str, pos: int, n: int, align: int = 1) -> int:
    if n <= 0:
        return 0
    if region == "head":
        p = pos % min(n, 4096)
    elif region == "tail":
        p = n - 1 - pos % min(n, 4096)
    else:
        p = pos % n
    return p - p % align


def mutate(data: bytes, muts: list[tuple]) -> bytes:
    b = bytearray(data)
    for m in muts:
        kind, region = m[0], m[1]
        n = len(b)
        if kind == "flip" and n:
            b[_where(region, m[2], n)] ^= 1 << m[3]
        elif kind == "byte" and n:
            b[_where(region, m[2], n)] = m[3]
        elif kind == "u32" and n >= 4:
            p = min(_where(region, m[2], n, 4), n - 4)
            b[p:p + 4] = int(m[3]).to_bytes(4, "little")
        elif kind == "truncate":
            del b[_where(region, m[2], n):]
        elif kind == "delete" and n:
            p = _where(region, m[2], n)
            del b[p:p + m[3]]
        elif kind == "insert":
            p = _where(region, m[2], n + 1)
            b[p:p] = m[3]
        elif kind == "copy" and n:
            src, dst = _where(region, m[2], n), _where(region, m[3], n)
            chunk = bytes(b[src:src + m[4]])
            b[dst:dst + len(chunk)] = chunk
    return bytes(b)


# -- guards ------------------------------------------------------------------------------------
@contextlib.contextmanager
def time_limit(seconds: float):
    def _alarm(signum, frame):
        raise Hang(f"example took longer than {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


@contextlib.contextmanager
def bounded_memory():
    """refinterp's budget at FUZZ_BUDGET and the soft address-space limit a little above the current size,
    so a size check that is missing shows up as an error instead of swapping the shared machine."""
    from refinterp import limits

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _vm_bytes() + AS_HEADROOM
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    limits.set_max_memory(FUZZ_BUDGET)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        limits.set_max_memory(None)


# -- budget and findings -----------------------------------------------------------------------
def target_seconds(weight: float, total_weight: float) -> float:
    total = float(os.environ.get("REFINTERP_FUZZ_SECONDS") or CI_SECONDS)
    return total * weight / total_weight


def findings_dir() -> Path:
    d = os.environ.get("REFINTERP_FUZZ_FINDINGS")
    p = Path(d) if d else Path(tempfile.gettempdir()) / "refinterp-fuzz-findings"
    p.mkdir(parents=True, exist_ok=True)
    return p


def save_finding(target: str, files: dict[str, bytes], err: BaseException) -> Path:
    h = hashlib.sha256(b"".join(files.values())).hexdigest()[:12]
    d = findings_dir() / f"{target}-{h}"
    d.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (d / name).write_bytes(data)
    (d / "error.txt").write_text("".join(traceback.format_exception(err)))
    return d


def expect_clean(target: str, files: dict[str, bytes], fn: Callable[[], Any]) -> None:
    """Run ``fn``: returning or raising a RefinterpError is fine; anything else is a finding."""
    try:
        with time_limit(EXAMPLE_TIMEOUT):
            fn()
    except RefinterpError:
        return
    except (Exception, Hang) as e:  # noqa: BLE001 - that is the point: nothing else may escape
        sig = signature(e)
        if sig[1].startswith(OPEN_MODULES) and not isinstance(e, Hang):
            if sig not in known_hits:
                known_examples[sig] = str(save_finding(f"open-{target}", files, e))
            known_hits[sig] = known_hits.get(sig, 0) + 1
            return
        raise Finding(f"{target}: {type(e).__name__}: {str(e)[:300]}", target, files, e) from e


def _findings(e: BaseException) -> list[Finding]:
    """Every Finding in ``e`` (hypothesis groups distinct failures); anything else is re-raised."""
    if isinstance(e, Finding):
        return [e]
    if isinstance(e, BaseExceptionGroup):
        return [f for sub in e.exceptions for f in _findings(sub)]
    raise e


def run_target(name: str, strategy: st.SearchStrategy, check: Callable[[Any], None], seconds: float) -> int:
    """Rounds of hypothesis examples until ``seconds`` are spent; returns the number of rounds."""
    keep_going = os.environ.get("REFINTERP_FUZZ_KEEP_GOING") == "1"
    failures: list[str] = []
    stop = time.monotonic() + seconds
    rounds = 0
    with bounded_memory():
        while True:
            @seed(BASE_SEED + rounds)
            @settings(max_examples=EXAMPLES_PER_ROUND, deadline=None, database=None, derandomize=False,
                      suppress_health_check=list(HealthCheck), print_blob=False)
            @given(strategy)
            def one_round(example):
                check(example)

            try:
                one_round()
            except (Finding, BaseExceptionGroup) as e:  # the shrunk example(s): save each once
                found = _findings(e)
                for f in found:
                    d = save_finding(f.target, f.files, f.error)
                    failures.append(f"round {rounds} (seed {BASE_SEED + rounds}): {str(f)[:400]} (reproducer: {d})")
                if not keep_going:
                    raise AssertionError("\n".join(failures)) from e
            rounds += 1
            if time.monotonic() >= stop:
                break
    print(f"fuzz {name}: {rounds} rounds x {EXAMPLES_PER_ROUND} examples in {seconds:.0f} s budget")
    for sig, n in sorted(known_hits.items()):
        print(f"  open (reported, not failing): {sig[0]} at {sig[1]}: {n} hits, e.g. {known_examples[sig]}")
    assert not failures, f"{name}: {len(failures)} finding(s):\n" + "\n".join(failures)
    return rounds
