"""Replay every saved fuzz finding in tests/fuzz/regressions/: only RefinterpError may escape.

Each finding is a folder ``<target>-<hash>/`` holding the mutated file(s) as the fuzzer saved them and
``finding.txt`` whose first word is ``fixed`` (the fix is in place: the replay must pass) or ``open``
(a reader owned elsewhere, reported to its owner: a strict xfail, so the fix is noticed)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from fuzz_harness import EXAMPLE_TIMEOUT, time_limit

import refinterp
from refinterp.errors import RefinterpError

HERE = Path(__file__).resolve().parent
FINDINGS = sorted(p for p in (HERE / "regressions").glob("*") if (p / "finding.txt").is_file())
SMALL_MODEL = HERE.parent / "fixtures" / "tflite" / "depth_space_int8.tflite"
META = ("finding.txt", "error.txt")


def _replay(folder: Path, tmp: Path) -> None:
    target = folder.name.rsplit("-", 1)[0]
    work = tmp / "case"
    shutil.copytree(folder, work, ignore=shutil.ignore_patterns(*META))
    files = sorted(p for p in work.iterdir() if p.is_file())
    if target.startswith(("tflite", "onnx")):
        from test_fuzz_models import load_and_run

        scheme_file = work / "scheme.txt"
        scheme = scheme_file.read_text().strip() if scheme_file.exists() else "float32"
        model = next(p for p in files if p.suffix in (".tflite", ".onnx"))
        load_and_run(model, scheme, 0, True)
    elif target in ("dump_npy", "dump_raw"):
        refinterp.dumps.read_dump(work)
    elif target.startswith("dump_"):
        refinterp.dumps.read_dump(files[0])
    elif target == "scheme":
        from refinterp.schemes import load_scheme

        g = refinterp.load(SMALL_MODEL)
        x = g.tensors[g.inputs[0]]
        refinterp.Session(g, load_scheme(str(files[0]))).run({g.inputs[0]: np.zeros([d or 1 for d in x.shape],
                                                                                     x.dtype)})
    elif target == "golden":
        from refinterp.golden.case import read_case
        from refinterp.golden.check import check_case

        check_case(read_case(work))
    else:
        raise AssertionError(f"unknown fuzz target '{target}' for {folder.name}")


def _params():
    for f in FINDINGS:
        status = (f / "finding.txt").read_text().split(maxsplit=1)[0].rstrip(":")
        marks = [pytest.mark.xfail(strict=True, reason=(f / "finding.txt").read_text().strip()[:200])] \
            if status == "open" else []
        yield pytest.param(f, id=f.name, marks=marks)


@pytest.mark.parametrize("folder", list(_params()))
def test_replay_finding(folder, tmp_path):
    import refinterp.dumps  # noqa: F401  (read_dump is lazy)

    try:
        with time_limit(EXAMPLE_TIMEOUT), np.errstate(all="ignore"):
            _replay(folder, tmp_path)
    except RefinterpError:
        pass


def test_findings_are_small():
    for f in FINDINGS:
        size = sum(p.stat().st_size for p in f.rglob("*") if p.is_file())
        assert size < 400_000, f"{f.name}: {size} bytes; keep regression files small"
