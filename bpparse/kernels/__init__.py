"""numba kernels: pure functions of numpy arrays and scalars, ``@njit(cache=True)`` (`bpparse.jit`).

Conventions (written once, used everywhere): a sentence of n words has dense ``(n+1, n+1)`` float64
arrays indexed ``[head, child]``; row/column 0 is ROOT; the diagonal and column 0 are unused.
Trees are int64 ``heads`` arrays of length n+1 with ``heads[0] == -1``.
"""
