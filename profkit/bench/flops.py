"""FLOP and byte counts per workload: one formula per workload, used for every implementation.

A benchmark credits the candidate and the baseline with the same ``Case.flops`` and
``Case.bytes``, computed here once per case, so a rate difference can only come from a time
difference. Byte counts are the *minimum* DRAM traffic (each input read once, each output
written once); a kernel that re-reads tiles moves more than this, so ``bytes / time`` is a lower
bound on its achieved bandwidth, comparable across implementations.

``FORMULAS`` holds the same formulas as text, for result files and table headers.
"""

from __future__ import annotations

ATTENTION_DIRECTIONS = ("fwd", "bwd", "fwd+bwd")

FORMULAS = {
    "matmul_flops": "2*M*N*K",
    "matmul_bytes": "(M*K + K*N)*in_itemsize + M*N*out_itemsize",
    "attention_flops": "fwd 4*B*H*N^2*d (halved when causal); bwd 2.5 x fwd; fwd+bwd 3.5 x fwd",
    "attention_bytes": "fwd 4*B*H*N*d*itemsize (Q,K,V read, O written); bwd 8x (Q,K,V,O,dO read, "
                       "dQ,dK,dV written); fwd+bwd 12x; softmax statistics not counted",
    "linear_flops": "2*M*K*N (int8 counted as ops)",
}

_ATTENTION_BWD_FACTOR = 2.5
_ATTENTION_BYTES_TENSORS = {"fwd": 4, "bwd": 8, "fwd+bwd": 12}


def _check_dims(**dims: int) -> None:
    """Raise ValueError unless every dimension is a non-negative integer."""
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def _check_itemsize(**sizes: int) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer number of bytes, got {value!r}")


def _check_direction(direction: str) -> None:
    if direction not in ATTENTION_DIRECTIONS:
        raise ValueError(f"direction must be one of {ATTENTION_DIRECTIONS}, got {direction!r}")


def matmul_flops(m: int, n: int, k: int) -> float:
    """FLOPs of C(m, n) = A(m, k) @ B(k, n): one multiply and one add per term, 2*m*n*k."""
    _check_dims(m=m, n=n, k=k)
    return 2.0 * m * n * k


def matmul_bytes(m: int, n: int, k: int, in_itemsize: int, out_itemsize: int) -> float:
    """Minimum DRAM bytes of C(m, n) = A(m, k) @ B(k, n): A and B read once, C written once."""
    _check_dims(m=m, n=n, k=k)
    _check_itemsize(in_itemsize=in_itemsize, out_itemsize=out_itemsize)
    return float((m * k + k * n) * in_itemsize + m * n * out_itemsize)


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, causal: bool,
                    direction: str = "fwd") -> float:
    """FLOPs of softmax(Q K^T) V for q, k, v: (batch, heads, seq, head_dim).

    Forward is two matmuls of 2*N*N*d each per head, 4*B*H*N^2*d, halved when causal (only the
    lower triangle is needed; the diagonal blocks' extra work is not credited). Backward does
    five such matmuls where forward does two (dV, dP, dS->dQ, dK and the recomputed S), 2.5x forward,
    the convention FlashAttention-2 and Triton's tutorial use.
    """
    _check_dims(batch=batch, heads=heads, seq=seq, head_dim=head_dim)
    _check_direction(direction)
    fwd = 4.0 * batch * heads * seq * seq * head_dim
    if causal:
        fwd /= 2.0
    if direction == "fwd":
        return fwd
    if direction == "bwd":
        return _ATTENTION_BWD_FACTOR * fwd
    return (1.0 + _ATTENTION_BWD_FACTOR) * fwd


def attention_bytes(batch: int, heads: int, seq: int, head_dim: int, itemsize: int,
                    direction: str = "fwd") -> float:
    """Minimum DRAM bytes of attention over (batch, heads, seq, head_dim) tensors.

    Forward reads Q, K, V and writes O (4 tensors); backward reads Q, K, V, O, dO and writes
    dQ, dK, dV (8 tensors). The per-row softmax statistics (B*H*N floats) are left out: they
    are 1/d of one tensor and not part of every implementation's interface. Causal masking
    does not change the minimum traffic.
    """
    _check_dims(batch=batch, heads=heads, seq=seq, head_dim=head_dim)
    _check_itemsize(itemsize=itemsize)
    _check_direction(direction)
    return float(_ATTENTION_BYTES_TENSORS[direction] * batch * heads * seq * head_dim * itemsize)


def linear_flops(m: int, k: int, n: int) -> float:
    """FLOPs (or integer ops) of y(m, n) = x(m, k) @ W^T with W: (n, k): 2*m*k*n."""
    _check_dims(m=m, k=k, n=n)
    return 2.0 * m * k * n
