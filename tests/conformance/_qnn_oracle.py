"""Run one ONNX model on Qualcomm's HTP emulation (onnxruntime-qnn) in this process and save the named
outputs: ``python _qnn_oracle.py MODEL FEEDS.npz OUT.npz HTP_ARCH [OUTPUT ...]``.

The tests call it in a subprocess, so an abort inside the emulator is reported as a finding instead
of ending the test session."""
import sys

import numpy as np

from refinterp.dumps.capture_qnn import htp_session


def main() -> int:
    model, feeds, out, arch, *names = sys.argv[1:]
    with np.load(feeds, allow_pickle=False) as f:
        feed = {k: f[k] for k in f.files}
    sess = htp_session(model, arch)
    names = names or [o.name for o in sess.get_outputs()]
    np.savez(out, **dict(zip(names, sess.run(names, feed))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
