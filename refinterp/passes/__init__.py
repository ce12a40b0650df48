"""Graph passes a scheme can request (top-level ``graph_passes: [name, ...]``), applied by
``Session`` before kernel resolution.  A pass maps a Graph to a new Graph (never mutates its input)."""
from __future__ import annotations

from typing import Callable

from ..ir import Graph
from .qdq import dq_matmul_nbits, fuse_qdq, fuse_qdq_x86
from .ort_const_fold import ort_const_fold
from .ort_conv_add import ort_conv_add_fusion8, ort_conv_add_fusion16
from .ort_fold import ort_conv_fold
from .ort_gelu import ort_gelu_fusion
from .ort_gemm import ort_matmul_add
from .ort_identity import ort_identity_elim
from .ort_matmul import ort_matmul_scale_fusion, ort_matmul_transpose_fusion
from .ort_matmul_bn import ort_matmul_bn_fusion
from .ort_layernorm import ort_layernorm_fusion, ort_simplified_layernorm_fusion, ort_skip_layernorm_fusion
from .ort_nchwc import ort_nchwc8, ort_nchwc16
from .ort_overridable import ort_overridable_initializers
from .ort_weight_bias import ort_weight_bias_quantization
from .qdq_htp import fuse_qdq_htp
from .torchq import fuse_qdq_torch

PASSES: dict[str, Callable[[Graph], Graph]] = {"fuse_qdq": fuse_qdq, "fuse_qdq_x86": fuse_qdq_x86,
                                              "fuse_qdq_torch": fuse_qdq_torch, "fuse_qdq_htp": fuse_qdq_htp,
                                              "dq_matmul_nbits": dq_matmul_nbits, "ort_nchwc16": ort_nchwc16,
                                              "ort_nchwc8": ort_nchwc8, "ort_conv_fold": ort_conv_fold,
                                              "ort_matmul_add": ort_matmul_add, "ort_gelu_fusion": ort_gelu_fusion,
                                              "ort_layernorm_fusion": ort_layernorm_fusion,
                                              "ort_simplified_layernorm_fusion": ort_simplified_layernorm_fusion,
                                              "ort_skip_layernorm_fusion": ort_skip_layernorm_fusion,
                                              "ort_matmul_transpose_fusion": ort_matmul_transpose_fusion,
                                              "ort_matmul_scale_fusion": ort_matmul_scale_fusion,
                                              "ort_const_fold": ort_const_fold, "ort_identity_elim": ort_identity_elim,
                                              "ort_matmul_bn_fusion": ort_matmul_bn_fusion,
                                              "ort_overridable_initializers": ort_overridable_initializers,
                                              "ort_conv_add_fusion16": ort_conv_add_fusion16, "ort_conv_add_fusion8": ort_conv_add_fusion8,
                                              "ort_weight_bias_quantization": ort_weight_bias_quantization}


def apply_passes(graph: Graph, names: list[str]) -> Graph:
    for name in names:
        graph = PASSES[name](graph)
    return graph
