"""Which elements of an ONNX Runtime element-wise float kernel take Eigen's packet code and which its
scalar code (onnxruntime/core/common/threadpool.cc ThreadPool::ParallelFor with Eigen's TensorCostModel
and CalculateParallelForBlock; Eigen's LinearVectorizedTraversal with 4-float SSE packets).

ORT splits the N elements of a functor (float in, float out; ``cost`` its compute cycles) into blocks
when Eigen's cost model asks for more than one thread -- cost per element c = 8 * 11/64 + cost
load / store / compute cycles, threads = min(T, floor((N c - 1e5) / 1e5 + 0.9)), T the intra-op
threads (the physical cores) -- of max(ceil(N / 4T), floor(4e4 / c)) elements (at most twice that),
coarsened while whole rounds of T blocks get fuller.  In each block the elements before the first
16-byte boundary of the (64-byte aligned) buffer and after the last whole packet run scalar code.
"""
from __future__ import annotations

PACKET = 4                         # SSE float packets
IO_CYCLES = 4 * 11 / 64 * 2        # Eigen's load / store cycles for 4 bytes in, 4 bytes out


def parallel_blocks(n: int, threads: int, cost: float) -> list[tuple[int, int]]:
    """[start, end) blocks of ORT's ParallelFor over ``n`` elements of a functor of ``cost`` cycles."""
    c = IO_CYCLES + cost
    if n <= 1 or threads <= 1:
        return [(0, n)]
    t = (n * c - 100000.0) / 100000.0 + 0.9
    if min(threads, max(1, int(t))) == 1:
        return [(0, n)]
    size = min(n, max(-(-n // (4 * threads)), int(40000.0 / c)))
    max_size = min(n, 2 * size)
    count = -(-n // size)
    eff = count / (-(-count // threads) * threads)
    prev = count
    while eff < 1.0 and prev > 1:
        coarser = -(-n // (prev - 1))
        if coarser > max_size:
            break
        c2 = -(-n // coarser)
        prev = c2
        e2 = c2 / (-(-c2 // threads) * threads)
        if e2 + 0.01 >= eff:
            size, count, eff = coarser, c2, max(eff, e2)
    return [(i * size, min(n, (i + 1) * size)) for i in range(count)]


def packet_spans(n: int, threads: int, cost: float) -> list[tuple[int, int, int, int]]:
    """(start, packets_from, packets_to, end) per block: elements in [packets_from, packets_to) take
    the packet code, the others of [start, end) the scalar code."""
    out = []
    for s, e in parallel_blocks(n, threads, cost):
        lo = s + min(e - s, (PACKET - s % PACKET) % PACKET)
        out.append((s, lo, lo + (e - lo) // PACKET * PACKET, e))
    return out
