"""Kernel unit tests, laid out as refinterp/kernels/ is (float/, int/, tflite/, onnxruntime/).
This folder is on sys.path (pytest prepends a conftest's folder), so ``kernel_harness`` imports."""
