"""Run ONNX models on Qualcomm's HTP emulation (onnxruntime-qnn) in this process and save the named
outputs: ``python _qnn_oracle.py MODEL FEEDS.npz OUT.npz HTP_ARCH [OUTPUT ...]``, or several models in
one process: ``python _qnn_oracle.py --batch JOBS.json`` (a list of [model, feeds, out, arch, [names]]).

The tests call it in a subprocess, so an abort inside the emulator is reported as a finding instead
of ending the test session.  Its address space is capped (ADDRESS_SPACE): on some Mul models the
emulator corrupts its heap and then allocates without bound (24 GB measured); the cap turns that into
an error instead of exhausting the machine."""
import json
import resource
import sys

import numpy as np

from refinterp.dumps.capture_qnn import htp_session

ADDRESS_SPACE = 8 << 30


def _one(model, feeds, out, arch, names) -> None:
    with np.load(feeds, allow_pickle=False) as f:
        feed = {k: f[k] for k in f.files}
    sess = htp_session(model, arch)
    names = names or [o.name for o in sess.get_outputs()]
    np.savez(out, **dict(zip(names, sess.run(names, feed))))


def main() -> int:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    if sys.argv[1] == "--batch":
        with open(sys.argv[2]) as f:
            for model, feeds, out, arch, names in json.load(f):
                _one(model, feeds, out, arch, names)
        return 0
    model, feeds, out, arch, *names = sys.argv[1:]
    _one(model, feeds, out, arch, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
