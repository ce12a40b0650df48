"""Arm's Vela compiler (ethos-u-vela) as a documentary oracle: the rounding mode it writes into the
Ethos-U command stream for each operator of a TFLite model.

``compile_roundings(model_path, accelerator, out_dir)`` runs Vela in a subprocess with
``--verbose-register-command-stream --enable-debug-db`` and returns, per TFLite node index, the list
of (NPU operation, rounding mode) of the NPU operations Vela emitted for it, in stream order.

How the stream maps to nodes: the debug database's ``queue`` table gives, for every NPU operation,
its byte offset in the command stream and the optimised operator it came from; ``optimised`` maps that
to a ``source`` operator whose ``ext_key`` is the node index in the input model.  Registers are
written only when they change, so the rounding in force at an NPU_OP_* is the last ``round_mode``
written before it: the OFM precision register on U55, the OFM scale register on U85.

Vela's modes in a common vocabulary: ``ROUND_MODE_DBL`` (U55) and ``ROUND_MODE_OFM_DOUBLE_SYMMETRIC``
(U85) are TFLite's double rounding -> "double"; ``ROUND_MODE_NATURAL`` / ``ROUND_MODE_OFM_NATURAL``
(one rounding, ties up) -> "natural"; ``*_TRUNCATE*`` -> "truncate"; ``ROUND_MODE_OFM_SYMMETRIC`` -> "symmetric".
"""
from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from pathlib import Path

CANONICAL = {"ROUND_MODE_DBL": "double", "ROUND_MODE_OFM_DOUBLE_SYMMETRIC": "double",
             "ROUND_MODE_NATURAL": "natural", "ROUND_MODE_OFM_NATURAL": "natural",
             "ROUND_MODE_TRUNCATE": "truncate", "ROUND_MODE_OFM_TRUNCATE_TO_ZERO": "truncate",
             "ROUND_MODE_OFM_TRUNCATE_TO_LOWER": "truncate", "ROUND_MODE_OFM_SYMMETRIC": "symmetric"}
_NOT_COMPUTE = {"NPU_OP_DMA_START", "NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT", "NPU_OP_STOP", "NPU_OP_PMU_MASK"}
_LINE = re.compile(r"0x([0-9a-f]+):.* - (NPU_\w+)\s+(.*)")


def _table(xml: str, name: str) -> list[dict]:
    m = re.search(r'<table name="%s">\s*<!\[CDATA\[(.*?)\]\]>' % name, xml, re.S)
    if m is None:
        raise ValueError(f"Vela debug database has no table '{name}'")
    return list(csv.DictReader(io.StringIO(m.group(1).strip())))


def parse(stream: str, debug_xml: str) -> dict[int, list[tuple[str, str]]]:
    source = {int(r["id"]): int(r["ext_key"]) for r in _table(debug_xml, "source")}
    optimised = {int(r["id"]): int(r["source_id"]) for r in _table(debug_xml, "optimised")}
    queue = {int(r["offset"]): int(r["optimised_id"]) for r in _table(debug_xml, "queue")}
    ofm_round = None
    out: dict[int, list[tuple[str, str]]] = {}
    for line in stream.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        offset, cmd, fields = int(m.group(1), 16), m.group(2), m.group(3)
        mode = re.search(r"round_mode = (\w+)", fields)
        if mode and "OFM" in cmd:
            ofm_round = mode.group(1)
        if cmd.startswith("NPU_OP_") and cmd not in _NOT_COMPUTE:
            node = source.get(optimised.get(queue.get(offset, -1), -1))
            if node is not None:
                kind = re.search(r"_mode = (\w+)", fields)
                out.setdefault(node, []).append((kind.group(1) if kind else cmd, CANONICAL.get(ofm_round, ofm_round)))
    return out


def compile_roundings(model: Path, accelerator: str, out_dir: Path) -> dict[int, list[tuple[str, str]]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", "import sys; from ethosu.vela.vela import main; sys.exit(main())", str(model), "--accelerator-config", accelerator,
                           "--output-dir", str(out_dir), "--enable-debug-db", "--verbose-register-command-stream"],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"vela failed on {model.name} ({accelerator}): {proc.stderr.strip()[-300:]}")
    xml = next(out_dir.glob("*_debug.xml")).read_text()
    return parse(proc.stdout, xml)
