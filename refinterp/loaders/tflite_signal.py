"""TFLite Micro's signal-library custom ops (the audio front end: tflite-micro ``signal/micro/kernels``)
as nodes: op ``Signal<Name>``, the flexbuffer custom options as attributes (ints and bools).

SignalFilterBankSpectralSubtraction keeps its noise estimate from one invoke to the next in a
persistent buffer (zero after allocation and reset).  The loader makes that state a variable
tensor of the graph, ``<node>#noise_state`` (uint32, one per channel, zero before the first run),
read as an extra input and updated from the node's second output, which is the estimate after the
step: a Session carries it like LSTM states and ``reset_state`` clears it.
"""
from __future__ import annotations

from typing import Any

from ..ir import TensorInfo

SIGNAL_OPS = ("SignalWindow", "SignalFftAutoScale", "SignalRfft", "SignalEnergy", "SignalFilterBank",
              "SignalFilterBankSquareRoot", "SignalFilterBankSpectralSubtraction", "SignalPCAN",
              "SignalFilterBankLog")


def signal_options(raw: bytes) -> dict[str, Any]:
    """The custom options' flexbuffer map (int / bool / float values); ValueError if unreadable."""
    from flatbuffers import flexbuffers

    if not raw:
        return {}
    try:
        m = flexbuffers.Loads(raw)
    except Exception as e:  # noqa: BLE001 - any decoding failure of untrusted bytes
        raise ValueError(f"unreadable custom options ({type(e).__name__})") from None
    if not isinstance(m, dict):
        raise ValueError("custom options are not a flexbuffer map")
    return {str(k): v for k, v in m.items() if isinstance(v, (bool, int, float))}


def spectral_state(node_name: str, ins: list[str], outs: list[str], tensors: dict[str, TensorInfo],
                   variables: list[str], updates: dict[str, str]) -> list[str]:
    """Add the noise-estimate state of a spectral-subtraction node (module docstring); new inputs."""
    if len(outs) < 2 or not outs[1] or outs[1] not in tensors:
        raise ValueError("expects two outputs (signal, noise estimate)")
    est = tensors[outs[1]]
    var = f"{node_name}#noise_state"
    tensors[var] = TensorInfo(var, est.shape, "uint32", source_name=var)
    variables.append(var)
    updates[var] = outs[1]
    return list(ins[:1]) + [var]
