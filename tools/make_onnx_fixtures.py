"""Regenerate the exporter-made ONNX fixtures (dev tool, not a test dependency).

Needs torch, onnx, onnxscript and onnxruntime in a scratch venv (never the project venv):

    /work/tfvenv/bin/pip install torch==2.13.0 onnx==1.23.2 onnxruntime==1.31.1 onnxscript
    /work/tfvenv/bin/python tools/make_onnx_fixtures.py [--out tests/fixtures/onnx]

Writes
  small_cnn_float32.onnx    torch.onnx.export of a small NCHW CNN (BatchNorm folded by the exporter)
  small_cnn_qdq_s8s8.onnx   quantize_static: QDQ, int8 activations, int8 per-channel weights
  small_cnn_qop_u8s8.onnx   quantize_static: QOperator (QLinearConv/QLinearMatMul...), uint8
                            activations, int8 per-tensor weights
  transformer_block_float32.onnx
                            torch.onnx.export (dynamo) of a post-norm transformer encoder block:
                            fused QKV Linear, scaled_dot_product_attention with 2 heads of 32,
                            tanh-approximated GELU MLP, two LayerNorms; input [2, 10, 64]
Deterministic: torch is seeded, BatchNorm statistics come from a fixed numpy seed, and calibration
uses fixed-seed uniform random inputs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                      QuantType, quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

REPO = Path(__file__).resolve().parent.parent
INPUT_SHAPE = (1, 3, 32, 32)
OPSET = 18
CALIBRATION_SAMPLES = 32


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU6(),      # depthwise
            nn.Conv2d(16, 32, 1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.Sigmoid(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc1 = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, classes)

    def forward(self, x):
        x = torch.flatten(self.features(x), 1)
        x = torch.relu(self.fc1(x))
        return torch.softmax(self.fc2(x), dim=-1)


def build_model() -> nn.Module:
    torch.manual_seed(0)
    model = SmallCNN().eval()
    rng = np.random.default_rng(7)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            with torch.no_grad():
                m.weight.copy_(torch.from_numpy(rng.uniform(0.6, 1.4, n).astype(np.float32)))
                m.bias.copy_(torch.from_numpy(rng.normal(0, 0.1, n).astype(np.float32)))
                m.running_mean.copy_(torch.from_numpy(rng.normal(0, 0.1, n).astype(np.float32)))
                m.running_var.copy_(torch.from_numpy(rng.uniform(0.6, 1.4, n).astype(np.float32)))
    return model


def _export(model: nn.Module, example: torch.Tensor, path: Path, names: tuple[str, str]) -> None:
    torch.onnx.export(model, (example,), str(path), input_names=[names[0]], output_names=[names[1]],
                      opset_version=OPSET, dynamo=True, external_data=False)
    proto = onnx.load(str(path))
    # the dynamo exporter records Python stack traces (host paths) as metadata; drop them
    for node in proto.graph.node:
        del node.metadata_props[:]
    del proto.metadata_props[:]
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))


def export_float(path: Path) -> None:
    _export(build_model(), torch.zeros(INPUT_SHAPE), path, ("input", "probs"))


class TransformerBlock(nn.Module):
    def __init__(self, d: int = 64, heads: int = 2, ff: int = 128):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2, self.act = nn.Linear(d, ff), nn.Linear(ff, d), nn.GELU(approximate="tanh")

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(d, dim=-1))
        a = nn.functional.scaled_dot_product_attention(q, k, v)
        x = self.norm1(x + self.proj(a.transpose(1, 2).reshape(b, t, d)))
        return self.norm2(x + self.fc2(self.act(self.fc1(x))))


def export_transformer(path: Path) -> None:
    torch.manual_seed(0)
    _export(TransformerBlock().eval(), torch.zeros(2, 10, 64), path, ("x", "y"))


class RandomReader(CalibrationDataReader):
    """Fixed-seed uniform [-1, 1) calibration batches."""

    def __init__(self, seed: int = 21):
        rng = np.random.default_rng(seed)
        self._batches = iter([{"input": rng.uniform(-1, 1, INPUT_SHAPE).astype(np.float32)}
                              for _ in range(CALIBRATION_SAMPLES)])

    def get_next(self):
        return next(self._batches, None)


def quantize(float_path: Path, out_path: Path, fmt: QuantFormat, act: QuantType,
             per_channel: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prepped = Path(tmp) / "prepped.onnx"
        quant_pre_process(str(float_path), str(prepped), skip_symbolic_shape=True)
        quantize_static(str(prepped), str(out_path), RandomReader(), quant_format=fmt,
                        activation_type=act, weight_type=QuantType.QInt8,
                        per_channel=per_channel, calibrate_method=CalibrationMethod.MinMax)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "onnx")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    fp = args.out / "small_cnn_float32.onnx"
    export_float(fp)
    quantize(fp, args.out / "small_cnn_qdq_s8s8.onnx", QuantFormat.QDQ, QuantType.QInt8, True)
    quantize(fp, args.out / "small_cnn_qop_u8s8.onnx", QuantFormat.QOperator, QuantType.QUInt8,
             False)
    export_transformer(args.out / "transformer_block_float32.onnx")
    for f in sorted(args.out.glob("*.onnx")):
        print(f"{f.name}: {f.stat().st_size} bytes")
    print(f"torch {torch.__version__}, onnx {onnx.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
