"""ONNX Runtime CPU (MLAS) kernels (variant ``ort``), integer and the float ops whose MLAS order matters."""
from . import (attention, contrib, dq_lstm, elementwise, embed, float_activation, float_conv, float_fused_matmul, float_gemm,  # noqa: F401
               float_matmul, float_eigen_unary, float_erf, float_trig, float_instance_norm, float_exp, float_layernorm, float_group_norm, float_gru, float_log, float_lstm, float_mvn, float_rnn, float_norm, float_pool, float_pow, float_reduce, float_resize, float_softmax, gemm, matmul_nbits, pool,
               qlinear_runtime, quantize,
               unpool)
