"""pytest plugin: ``pytest --refinterp-golden DIR [--refinterp-kernel mod:fn] [--refinterp-scheme S]``.

Every golden case under DIR becomes one test item ``golden::<case folder>`` (e.g.
``golden::0003_CONV_2D_stem_conv``), added to whatever pytest collects otherwise: to run only the
golden items, also pass DIR as the path to collect (``pytest --refinterp-golden DIR DIR``).  Without
``--refinterp-kernel`` the cases are re-run with refinterp's kernels (under each case's scheme, or
``--refinterp-scheme``).  A failing item's report is the first differing index and the two values.
Registered as the ``pytest11`` entry point ``refinterp``; or load it with
``-p refinterp.golden.pytest_plugin``.
"""
from __future__ import annotations

from pathlib import Path

import pytest


def pytest_addoption(parser) -> None:
    g = parser.getgroup("refinterp", "refinterp golden vectors")
    g.addoption("--refinterp-golden", metavar="DIR", default=None, help="collect each golden case under DIR")
    g.addoption("--refinterp-kernel", metavar="MODULE:FUNCTION", default=None,
                help="check this callable fn(case, inputs) -> outputs instead of refinterp's kernels")
    g.addoption("--refinterp-scheme", metavar="SCHEME", default=None, help="scheme for refinterp's kernels")


class GoldenFailure(Exception):
    pass


class GoldenItem(pytest.Item):
    def __init__(self, *, case_dir: Path, **kw) -> None:
        super().__init__(**kw)
        self.case_dir = case_dir

    def runtest(self) -> None:
        from .case import read_case
        from .check import check_case

        cfg = self.config
        result = check_case(read_case(self.case_dir), cfg.getoption("--refinterp-scheme"), _kernel(cfg))
        if not result.ok:
            raise GoldenFailure(f"{result.case}: {result.message}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, GoldenFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.case_dir, None, f"golden case {self.case_dir.name}"


class GoldenCollector(pytest.Collector):
    def __init__(self, *, root: Path, **kw) -> None:
        super().__init__(**kw)
        self.root = root

    def collect(self):
        from .case import list_cases

        for d in list_cases(self.root):
            yield GoldenItem.from_parent(self, name=d.name, case_dir=d)


_KERNELS: dict[str, object] = {}


def _kernel(config):
    spec = config.getoption("--refinterp-kernel")
    if not spec:
        return None
    if spec not in _KERNELS:
        from .check import load_user_kernel

        _KERNELS[spec] = load_user_kernel(spec)
    return _KERNELS[spec]


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselection sees the items
def pytest_collection_modifyitems(session, config, items) -> None:
    root = config.getoption("--refinterp-golden")
    if not root:
        return
    col = GoldenCollector.from_parent(session, name="golden", root=Path(root))
    for item in col.collect():
        items.append(item)
