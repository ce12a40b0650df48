"""Write the demo input and the demo "device dump" (dev tool, not a test dependency).

    /work/main/.venv/bin/python tools/capture_demo_dump.py [--models-dir refinterp/models]

Reads  refinterp/models/demo_int8.tflite (made by tools/make_tflite_fixtures.py).
Writes refinterp/models/demo_input.npz       one input, key = input tensor name, model input dtype
       refinterp/models/demo_device_dump.npz every non-constant tensor (the graph inputs and every
                                             op output), key = tensor name, raw stored dtype

The "device" is LiteRT's default CPU path: OpResolverType.BUILTIN (optimized kernels with the
XNNPACK delegate applied), num_threads=1, experimental_preserve_all_tensors=True. With
preserve_all_tensors LiteRT gives every delegated op its own XNNPACK partition, so intermediate
tensors hold XNNPACK's results, not stale memory; the script reports how many ops were delegated.
The input is a fixed function of DEMO_INPUT_SEED, so reruns with the same LiteRT are identical.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

REPO = Path(__file__).resolve().parent.parent
DEMO_INPUT_SEED = 2024


def make_demo_input(detail: dict) -> np.ndarray:
    """Smooth image-like pattern in [-1, 1] plus noise, quantized with the input's own params."""
    rng = np.random.default_rng(DEMO_INPUT_SEED)
    _, h, w, c = detail["shape"]
    yy, xx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    planes = [np.sin(3 * xx + k) * np.cos(2 * yy - k) for k in range(c)]
    real = np.clip(np.stack(planes, axis=-1)[None] + rng.normal(0, 0.15, (1, h, w, c)), -1, 1)
    dtype = np.dtype(detail["dtype"])
    if dtype.kind == "f":
        return real.astype(dtype)
    scale, zero_point = detail["quantization"]
    info = np.iinfo(dtype)
    # round-half-even then saturate, as the quantizer of a float pipeline would
    return np.clip(np.round(real / scale) + zero_point, info.min, info.max).astype(dtype)


def capture(model_path: Path, feed: np.ndarray) -> tuple[dict[str, np.ndarray], int, int]:
    interp = Interpreter(model_path=str(model_path),
                         experimental_op_resolver_type=OpResolverType.BUILTIN,
                         experimental_preserve_all_tensors=True, num_threads=1)
    interp.allocate_tensors()
    inp = interp.get_input_details()[0]
    interp.set_tensor(inp["index"], feed)
    interp.invoke()
    ops = interp._get_ops_details()
    delegates = [op for op in ops if op["op_name"] == "DELEGATE"]
    delegated = {i for op in delegates for i in op["outputs"]}
    model_ops = [op for op in ops if op["op_name"] != "DELEGATE"]
    n_delegated = sum(1 for op in model_ops if set(op["outputs"]) & delegated)
    indices = [d["index"] for d in interp.get_input_details()]
    indices += [i for op in model_ops for i in op["outputs"] if i >= 0 and i not in indices]
    names = {t["index"]: t["name"] for t in interp.get_tensor_details()}
    dump = {names[i]: np.array(interp.get_tensor(i)) for i in indices}
    if len(dump) != len(indices):
        raise SystemExit(f"{model_path}: duplicate tensor names, cannot key the dump by name")
    return dump, n_delegated, len(model_ops)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", type=Path, default=REPO / "refinterp" / "models")
    args = ap.parse_args(argv)
    model = args.models_dir / "demo_int8.tflite"
    if not model.is_file():
        raise SystemExit(f"{model}: missing; run tools/make_tflite_fixtures.py first")

    detail = Interpreter(model_path=str(model)).get_input_details()[0]
    feed = make_demo_input(detail)
    np.savez(args.models_dir / "demo_input.npz", **{detail["name"]: feed})

    dump, n_delegated, n_ops = capture(model, feed)
    if not np.array_equal(dump[detail["name"]], feed):
        raise SystemExit(f"{model}: captured input differs from the fed input")
    np.savez(args.models_dir / "demo_device_dump.npz", **dump)
    print(f"input {detail['name']} {feed.dtype} {list(feed.shape)}; "
          f"{len(dump)} tensors dumped; {n_delegated}/{n_ops} ops ran in XNNPACK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
