"""Scalar and 1-D log-space helpers shared by the kernels (docs/design.md §2).

All functions are ``@njit(cache=True)`` and small enough for LLVM to inline into callers. They accept
``-inf`` (a probability of zero) wherever a log-probability is expected and never return NaN for
inputs in ``[-inf, +inf)``.
"""
import numpy as np

from bpparse.jit import njit


@njit(cache=True)
def log1pexp(x):
    """log(1 + e^x) for a float64 x, without overflow for large x or loss for very negative x."""
    if x > 0.0:
        return x + np.log1p(np.exp(-x))
    return np.log1p(np.exp(x))


@njit(cache=True)
def softplus(x):
    """softplus(x) = max(x, 0) + log1p(exp(-|x|)) = log(1 + e^x) (docs/design.md §2, pairwise messages)."""
    return log1pexp(x)


@njit(cache=True)
def log_sigmoid(x):
    """log σ(x) = -softplus(-x): the log-probability of a boolean variable with log-odds x."""
    return -log1pexp(-x)


@njit(cache=True)
def log1mexp(x):
    """log(1 - e^x) for x <= 0 (Mächler 2012: log1p branch near -inf, expm1 branch near 0).

    Returns -inf at x = 0 and 0 at x = -inf.
    """
    if x > -0.6931471805599453:
        return np.log(-np.expm1(x))
    return np.log1p(-np.exp(x))


@njit(cache=True)
def logaddexp(a, b):
    """log(e^a + e^b) for float64 scalars; -inf when both are -inf."""
    if a < b:
        a, b = b, a
    if b == -np.inf:
        return a
    return a + np.log1p(np.exp(b - a))


@njit(cache=True)
def logsumexp(x):
    """log Σ_i e^{x[i]} over a 1-D float64 array; -inf for an empty array or all -inf entries."""
    mx = -np.inf
    for i in range(x.shape[0]):
        if x[i] > mx:
            mx = x[i]
    if mx == -np.inf:
        return -np.inf
    total = 0.0
    for i in range(x.shape[0]):
        total += np.exp(x[i] - mx)
    return mx + np.log(total)


@njit(cache=True)
def max_or_logsumexp(buf, k, use_max):
    """(max or log-sum-exp of buf[:k], first index attaining the max); (-inf, 0) when k = 0 or all
    entries are -inf. The one reduction of the exact DPs' two semirings (``use_max``: Viterbi)."""
    best = -np.inf
    arg = 0
    for j in range(k):
        if buf[j] > best:
            best = buf[j]
            arg = j
    if use_max or best == -np.inf:
        return best, arg
    acc = 0.0
    for j in range(k):
        acc += np.exp(buf[j] - best)
    return best + np.log(acc), arg
