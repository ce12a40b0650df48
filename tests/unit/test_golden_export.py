"""golden export: the C header compiles under -std=c99 -Wall -Werror and holds the right values;
raw files read back bit for bit; the pytest plugin collects cases with readable ids."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refinterp.cli.main import main
from refinterp.golden import sweep_cases, write_cases
from refinterp.golden.case import list_cases, read_case
from refinterp.golden.export_c import c_ident

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gexp")
    out = root / "cases"
    cases = sweep_cases("CONV_2D", "tflite-reference", 3) + sweep_cases("SOFTMAX", "tflite-reference", 2)
    for i, c in enumerate(cases):
        c.meta["name"] = f"{i:04d}_{c.meta['name'].split('_', 1)[1]}"
    write_cases(out, cases)
    return out


def test_c_header_compiles_and_holds_values(cases_dir, tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")  # gcc is installed on the project machines
    hdr = tmp_path / "golden.h"
    assert main(["golden", "export", str(cases_dir), "--format", "c", "--out", str(hdr)]) == 0
    case = read_case(list_cases(cases_dir)[0])
    cid = c_ident("golden_" + case.name)
    y = case.arrays["output.0"]
    acc = case.arrays["acc.0"]
    mult = case.meta["plan"]["multiplier"]
    scale = np.float32(case.meta["inputs"][0]["quant"]["scale"][0])
    k = y.size // 2
    (tmp_path / "main.c").write_text(f"""
#include <stdio.h>
#include "golden.h"
int main(void) {{
  int bad = 0;
  bad |= GOLDEN_NUM_CASES != 5;
  bad |= {cid}_output0[{k}] != {int(y.flat[k])};
  bad |= {cid.upper()}_OUTPUT0_SIZE != {y.size};
  bad |= {cid}_output0_shape[3] != {y.shape[3]};
  bad |= {cid}_acc0[{k}] != {int(acc.flat[k])};
  bad |= {cid}_plan_multiplier[0] != {int(mult[0])};
  bad |= {cid}_input0_scale[0] != {float(scale)!r}f;
  bad |= {cid}_input1_zero_point[0] != 0;
  printf("%s\\n", golden_case_names[4]);
  return bad;
}}
""")
    exe = tmp_path / "t"
    res = subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-Wextra", "-pedantic", "-o", str(exe),
                          str(tmp_path / "main.c")], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0
    assert run.stdout.strip() == list_cases(cases_dir)[4].name
    assert main(["golden", "export", str(cases_dir), "--format", "c", "--out", str(hdr)]) == 2  # no overwrite


def test_raw_export_reads_back(cases_dir, tmp_path):
    out = tmp_path / "raw"
    assert main(["golden", "export", str(cases_dir), "--format", "raw", "--out", str(out)]) == 0
    for folder in list_cases(cases_dir):
        case = read_case(folder)
        man = json.loads((out / folder.name / "manifest.json").read_text())
        assert man["plan"] == case.meta["plan"]
        for f in man["files"]:
            data = np.fromfile(out / folder.name / f["file"], dtype=np.dtype(f["dtype"]).newbyteorder("<"))
            np.testing.assert_array_equal(data.reshape(f["shape"]), case.arrays[f["array"]])


def _pytest(args, cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "refinterp.golden.pytest_plugin", "-q",
                           "-p", "no:cacheprovider", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


def test_pytest_plugin(cases_dir, tmp_path):
    d = str(cases_dir)
    res = _pytest(["--refinterp-golden", d, d, "--collect-only"], tmp_path)
    names = [p.name for p in list_cases(cases_dir)]
    assert all(f"golden::{n}" in res.stdout for n in names), res.stdout
    res = _pytest(["--refinterp-golden", d, d], tmp_path)
    assert res.returncode == 0 and "5 passed" in res.stdout, res.stdout[-2000:]
    (tmp_path / "bad_kernel.py").write_text(
        "import numpy as np\n"
        "def kernel(case, inputs):\n"
        "    s = case['outputs'][0]\n"
        "    return [np.zeros(s['shape'], s['dtype'])]\n")
    res = _pytest(["--refinterp-golden", d, d, "--refinterp-kernel", "bad_kernel:kernel", "-rf"], tmp_path)
    assert res.returncode == 1 and "5 failed" in res.stdout
    assert "first difference at index" in res.stdout and names[0] in res.stdout
