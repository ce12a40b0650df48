#!/usr/bin/env python3
"""Build the aarch64 emulation environment (qemu user mode + arm64 Debian root + the aarch64 wheels of
LiteRT / ONNX Runtime / tflite-runtime 2.14) that the ARM64 conformance tests and
`refinterp capture --arch arm64` use.  Idempotent; the same as `python -m refinterp.dumps.arm64_env`
(refinterp/dumps/arm64_env.py).

usage: tools/setup_arm64_env.py [--install-system] [--if-possible]
  --install-system  apt-get qemu-user-static and mmdebstrap when missing (needs root)
  --if-possible     never fail: print why the environment cannot be built and exit 0
                    (`make test` uses this; the ARM64 tests then skip with that reason)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from refinterp.dumps.arm64_env import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
