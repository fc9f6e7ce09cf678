"""Linear-chain (bigram) model over one tag column: forward-backward and Viterbi in log space.

A sentence of n tokens (no ROOT: token i here is word i+1) takes one of g tags per token. The model is

    p(t_1..t_n) ∝ exp( trans[g, t_1] + Σ_i unary[i, t_i] + Σ_{i>1} trans[t_{i-1}, t_i] + trans[t_n, g] )

with ``unary`` float64 (n, g) and ``trans`` float64 (g+1, g+1) log-potentials; row / column g is
the START / END boundary state. A ``-inf`` unary entry forbids a tag at a token (a candidate
restriction); ``-inf`` transitions forbid a tag bigram. Everything runs in log space (logsumexp
with max shift), so scores of ±1e4 over hundreds of tokens neither overflow nor underflow.
Only the finite-unary tags of each token are visited, so a restriction to c candidates a token
costs O(n c²) instead of O(n g²).

For joint BP (docs/shared DESIGN §7) the incoming log-messages to the tag variables are added to
``unary`` and the message back to T_i is ``chain_log_marginals(...)[0][i] - incoming[i]``.
"""
from typing import NamedTuple

import numpy as np

from bpparse.jit import njit

NEG_INF = -np.inf


@njit(cache=True, nogil=True)
def _candidates(unary):
    """int64 (n, g) finite-unary tag lists (first cnt[i] entries of row i) and int64 (n,) counts."""
    n, g = unary.shape
    cand = np.empty((n, g), dtype=np.int64)
    cnt = np.zeros(n, dtype=np.int64)
    for i in range(n):
        c = 0
        for t in range(g):
            if unary[i, t] > NEG_INF:
                cand[i, c] = t
                c += 1
        cnt[i] = c
    return cand, cnt


@njit(cache=True, nogil=True)
def chain_forward_backward(unary, trans):
    """Log forward / backward tables of the bigram chain.

    alpha[i, t] = log Σ over t_1..t_{i-1} of exp(score of the prefix ending in t_i = t, unary[i, t]
    included); beta[i, t] = log Σ over t_{i+1}..t_n of exp(score of the suffix after t_i = t, the END
    transition included). Both float64 (n, g), -inf for forbidden tags; returns (alpha, beta, logZ)
    with logZ = logsumexp_t alpha[n-1, t] + beta[n-1, t] (trans[g, g] for n = 0).
    """
    n, g = unary.shape
    alpha = np.full((n, g), NEG_INF)
    beta = np.full((n, g), NEG_INF)
    if n == 0:
        return alpha, beta, trans[g, g]
    cand, cnt = _candidates(unary)
    tmp = np.empty(g)
    for a in range(cnt[0]):
        t = cand[0, a]
        alpha[0, t] = trans[g, t] + unary[0, t]
    for i in range(1, n):
        for b in range(cnt[i]):
            t = cand[i, b]
            m = NEG_INF
            for a in range(cnt[i - 1]):
                s = cand[i - 1, a]
                v = alpha[i - 1, s] + trans[s, t]
                tmp[a] = v
                if v > m:
                    m = v
            if m == NEG_INF:
                continue
            acc = 0.0
            for a in range(cnt[i - 1]):
                acc += np.exp(tmp[a] - m)
            alpha[i, t] = unary[i, t] + m + np.log(acc)
    for a in range(cnt[n - 1]):
        t = cand[n - 1, a]
        beta[n - 1, t] = trans[t, g]
    for i in range(n - 2, -1, -1):
        for a in range(cnt[i]):
            s = cand[i, a]
            m = NEG_INF
            for b in range(cnt[i + 1]):
                t = cand[i + 1, b]
                v = trans[s, t] + unary[i + 1, t] + beta[i + 1, t]
                tmp[b] = v
                if v > m:
                    m = v
            if m == NEG_INF:
                continue
            acc = 0.0
            for b in range(cnt[i + 1]):
                acc += np.exp(tmp[b] - m)
            beta[i, s] = m + np.log(acc)
    m = NEG_INF
    for a in range(cnt[n - 1]):
        t = cand[n - 1, a]
        v = alpha[n - 1, t] + beta[n - 1, t]
        if v > m:
            m = v
    if m == NEG_INF:
        return alpha, beta, NEG_INF
    acc = 0.0
    for a in range(cnt[n - 1]):
        t = cand[n - 1, a]
        acc += np.exp(alpha[n - 1, t] + beta[n - 1, t] - m)
    return alpha, beta, m + np.log(acc)


@njit(cache=True, nogil=True)
def chain_log_marginals(unary, trans):
    """(log p(t_i = t) float64 (n, g), logZ): log node marginals alpha + beta - logZ (-inf where
    forbidden; all -inf when no tag sequence is allowed, logZ = -inf)."""
    alpha, beta, logz = chain_forward_backward(unary, trans)
    n, g = unary.shape
    out = np.full((n, g), NEG_INF)
    if logz == NEG_INF:
        return out, logz
    for i in range(n):
        for t in range(g):
            if alpha[i, t] > NEG_INF and beta[i, t] > NEG_INF:
                out[i, t] = alpha[i, t] + beta[i, t] - logz
    return out, logz


@njit(cache=True, nogil=True)
def chain_marginals(unary, trans):
    """Node marginals, expected transition counts and log Z of the bigram chain.

    Returns (marg float64 (n, g) probabilities p(t_i = t); counts float64 (g+1, g+1) with
    counts[s, t] = Σ_i p(t_{i-1} = s, t_i = t), counts[g, t] = p(t_1 = t), counts[t, g] = p(t_n = t)
    (the gradient of logZ with respect to ``trans``); logZ). Zeros and logZ = -inf when no
    sequence is allowed.
    """
    alpha, beta, logz = chain_forward_backward(unary, trans)
    n, g = unary.shape
    marg = np.zeros((n, g))
    counts = np.zeros((g + 1, g + 1))
    if n == 0:
        counts[g, g] = 1.0
        return marg, counts, logz
    if logz == NEG_INF:
        return marg, counts, logz
    cand, cnt = _candidates(unary)
    for i in range(n):
        for a in range(cnt[i]):
            t = cand[i, a]
            v = alpha[i, t] + beta[i, t]
            if v > NEG_INF:
                marg[i, t] = np.exp(v - logz)
    for a in range(cnt[0]):
        t = cand[0, a]
        counts[g, t] += marg[0, t]
    for a in range(cnt[n - 1]):
        t = cand[n - 1, a]
        counts[t, g] += marg[n - 1, t]
    for i in range(1, n):
        for b in range(cnt[i]):
            t = cand[i, b]
            right = unary[i, t] + beta[i, t] - logz
            if right == NEG_INF:
                continue
            for a in range(cnt[i - 1]):
                s = cand[i - 1, a]
                v = alpha[i - 1, s] + trans[s, t] + right
                if v > NEG_INF:
                    counts[s, t] += np.exp(v)
    return marg, counts, logz


@njit(cache=True, nogil=True)
def _best_previous(score, trans, t, cand, cnt):
    """(max over the candidates s of score[s] + trans[s, t], that s; -1 when none is finite)."""
    m = NEG_INF
    arg = -1
    for a in range(cnt):
        s = cand[a]
        v = score[s] + trans[s, t]
        if v > m:
            m = v
            arg = s
    return m, arg


@njit(cache=True, nogil=True)
def chain_viterbi(unary, trans):
    """int64 (n,) best tag sequence argmax_t score(t) (ties to the lower tag id); all -1 when no
    sequence is allowed."""
    n, g = unary.shape
    best = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return best
    cand, cnt = _candidates(unary)
    delta = np.full((n, g), NEG_INF)
    back = np.zeros((n, g), dtype=np.int64)
    for a in range(cnt[0]):
        t = cand[0, a]
        delta[0, t] = trans[g, t] + unary[0, t]
    for i in range(1, n):
        for b in range(cnt[i]):
            t = cand[i, b]
            m, arg = _best_previous(delta[i - 1], trans, t, cand[i - 1], cnt[i - 1])
            if arg >= 0:
                delta[i, t] = m + unary[i, t]
                back[i, t] = arg
    _, arg = _best_previous(delta[n - 1], trans, g, cand[n - 1], cnt[n - 1])
    if arg < 0:
        return best
    best[n - 1] = arg
    for i in range(n - 1, 0, -1):
        best[i - 1] = back[i, best[i]]
    return best


# ---------------------------------------------------------------------------------------------
# A tag column as a log-linear model over hashed weight blocks (CRF of order 1, or order 0).


class ColumnData(NamedTuple):
    """The tokens of a corpus as one column model reads them.

    bases int64 (N, K): start of each feature key's block of g weights in theta (features.tags;
    negative = feature off);
    starts int64 (S+1,): token offsets of the sentences; gold int64 (N,): gold tag ids (unused when
    predicting); cond int64 (N,): row of ``allowed`` restricting each token's tags (-1 = all tags);
    allowed bool (C, g): the candidate restriction (e.g. the tags seen with each UPOS), also as
    lists: row c's tags are allowed_tags[allowed_starts[c]:allowed_starts[c+1]] (int64), so that
    dense loops visit only those (EWT's FEATS: 26 of 230 values a token on average)."""

    bases: np.ndarray
    starts: np.ndarray
    gold: np.ndarray
    cond: np.ndarray
    allowed: np.ndarray
    allowed_starts: np.ndarray
    allowed_tags: np.ndarray


class ColumnParams(NamedTuple):
    """theta float64 (nblocks·g + (g+1)²): feature blocks, then the (g+1, g+1) transition
    log-potentials (row / column g = START / END; unused when order = 0); g: number of tags;
    order: 1 for the bigram chain, 0 for independent per-token softmaxes.

    Compact form (a loaded tagger: a few percent of its blocks' weights are nonzero): theta holds
    only the transitions, and block r's nonzero weights are row_values[row_starts[r]:row_starts[r+1]]
    (float32) for the tags row_tags[...] (int16); row_starts int32 (nblocks+1,). Dense form:
    row_starts empty."""

    theta: np.ndarray
    g: int
    order: int
    row_starts: np.ndarray
    row_tags: np.ndarray
    row_values: np.ndarray


class AdaGrad(NamedTuple):
    """AdaGrad state: g2 float64 (len theta) running sums of squared gradients; u float64 (len
    theta) Σ c·Δθ for the averaged weights θ̄ = θ - u / c; lr: step size; eps: added to √g2;
    l2: strength of the L2 penalty (l2/2)·θ² applied to the weights a sentence touches (a
    frequency-weighted penalty: a feature is shrunk once for each sentence it fires in);
    min_update: feature weights whose gradient is smaller in magnitude are not moved (0: all),
    so that a (feature, tag) weight the data never pushes stays exactly 0 and the stored
    tagger, which keeps only nonzero weights, stays small."""

    g2: np.ndarray
    u: np.ndarray
    lr: float
    eps: float
    l2: float
    min_update: float = 0.0


@njit(cache=True, nogil=True)
def column_unary(data, params, s):
    """float64 (n, g) unary log-potentials of sentence s: unary[i, t] = Σ_k theta[bases[i, k] + t],
    -inf for the tags ``allowed`` excludes."""
    a = data.starts[s]
    e = data.starts[s + 1]
    g = params.g
    theta = params.theta
    starts, tags, values = params.row_starts, params.row_tags, params.row_values
    compact = starts.shape[0] > 0
    K = data.bases.shape[1]
    un = np.zeros((e - a, g))
    for i in range(a, e):
        c = data.cond[i]
        for k in range(K):
            b = data.bases[i, k]
            if b < 0:
                continue
            if compact:
                r = b // g
                for j in range(starts[r], starts[r + 1]):
                    un[i - a, tags[j]] += values[j]
            elif c >= 0:
                for j in range(data.allowed_starts[c], data.allowed_starts[c + 1]):
                    t = data.allowed_tags[j]
                    un[i - a, t] += theta[b + t]
            else:
                for t in range(g):
                    un[i - a, t] += theta[b + t]
        if c >= 0:
            for t in range(g):
                if not data.allowed[c, t]:
                    un[i - a, t] = NEG_INF
    return un


@njit(cache=True, nogil=True)
def _transitions(params):
    g = params.g
    off = params.theta.shape[0] - (g + 1) * (g + 1)
    return params.theta[off:].reshape((g + 1, g + 1)), off


@njit(cache=True, nogil=True)
def _order0(unary):
    """Order-0 analogue of chain_marginals: row softmaxes, counts unused, logZ = Σ_i lse_t."""
    n, g = unary.shape
    marg = np.zeros((n, g))
    logz = 0.0
    for i in range(n):
        m = NEG_INF
        for t in range(g):
            if unary[i, t] > m:
                m = unary[i, t]
        if m == NEG_INF:
            return marg, NEG_INF
        acc = 0.0
        for t in range(g):
            if unary[i, t] > NEG_INF:
                marg[i, t] = np.exp(unary[i, t] - m)
                acc += marg[i, t]
        for t in range(g):
            marg[i, t] /= acc
        logz += m + np.log(acc)
    return marg, logz


@njit(cache=True, nogil=True)
def _sentence_stats(data, params, s):
    """(marg (n, g), expected transition counts (g+1, g+1), logZ, gold score) of sentence s."""
    un = column_unary(data, params, s)
    g = params.g
    n = un.shape[0]
    a = data.starts[s]
    gold_score = 0.0
    for i in range(n):
        gold_score += un[i, data.gold[a + i]]
    if params.order == 1:
        trans, _ = _transitions(params)
        marg, counts, logz = chain_marginals(un, trans)
        prev = g
        for i in range(n):
            t = data.gold[a + i]
            gold_score += trans[prev, t]
            prev = t
        gold_score += trans[prev, g]
    else:
        marg, logz = _order0(un)
        counts = np.zeros((g + 1, g + 1))
    return marg, counts, logz, gold_score


@njit(cache=True, nogil=True)
def column_loglik_grad(data, params, grad):
    """Conditional log-likelihood Σ_s log p(gold_s | x_s) (float) and its gradient added into
    ``grad`` float64 (len theta): ∂/∂θ = Σ (f(x, gold) - E_p[f(x, t)])."""
    g = params.g
    total = 0.0
    _, off = _transitions(params)
    K = data.bases.shape[1]
    for s in range(data.starts.shape[0] - 1):
        marg, counts, logz, gs = _sentence_stats(data, params, s)
        total += gs - logz
        a = data.starts[s]
        n = marg.shape[0]
        prev = g
        for i in range(n):
            gt = data.gold[a + i]
            for k in range(K):
                b = data.bases[a + i, k]
                if b < 0:
                    continue
                grad[b + gt] += 1.0
                for t in range(g):
                    grad[b + t] -= marg[i, t]
            if params.order == 1:
                grad[off + prev * (g + 1) + gt] += 1.0
                prev = gt
        if params.order == 1:
            grad[off + prev * (g + 1) + g] += 1.0
            for q in range((g + 1) * (g + 1)):
                grad[off + q] -= counts[q // (g + 1), q % (g + 1)]
    return total


@njit(cache=True, nogil=True)
def _grown(a, n):
    """A copy of int64 ``a`` (first n entries) with twice the room."""
    out = np.empty(2 * n, dtype=np.int64)
    out[:n] = a[:n]
    return out


@njit(cache=True, nogil=True)
def column_train_pass(data, params, opt, order, c):
    """One AdaGrad pass over the sentences in ``order`` (int64 ids), one update a sentence:
    θ += lr · ∇ / (√g2 + eps) on the blocks the sentence touches (and the transitions), with
    u += c · Δθ for averaging (c: update counter, incremented a sentence). Returns (c, Σ log p).
    A sentence's gradient is summed in a buffer of its own blocks (``slot`` numbers them), not
    in a vector as long as theta, over the tokens' allowed tags only (the others' marginals are
    0); without L2, a block touched by tokens of one ``cond`` row is updated on that row's tags
    only (the others' gradients are 0, so they would not move)."""
    g = params.g
    theta = params.theta
    _, off = _transitions(params)
    K = data.bases.shape[1]
    slot = np.full(off // g, -1, dtype=np.int64)
    touched = np.empty(64, dtype=np.int64)
    row = np.empty(64, dtype=np.int64)  # the cond row of the tokens touching a block, -1 if mixed
    grad = np.zeros(64 * g)
    tgrad = np.zeros((g + 1) * (g + 1))
    total = 0.0
    for s in order:
        marg, counts, logz, gs = _sentence_stats(data, params, s)
        if logz == NEG_INF:
            continue
        total += gs - logz
        a = data.starts[s]
        n = marg.shape[0]
        nt = 0
        prev = g
        for i in range(n):
            gt = data.gold[a + i]
            cr = data.cond[a + i]
            for k in range(K):
                b = data.bases[a + i, k]
                if b < 0:
                    continue
                if slot[b // g] < 0:
                    slot[b // g] = nt
                    if nt == touched.shape[0]:
                        touched = _grown(touched, nt)
                        row = _grown(row, nt)
                        more = np.zeros(2 * nt * g)
                        more[:nt * g] = grad
                        grad = more
                    touched[nt] = b
                    row[nt] = cr
                    nt += 1
                elif row[slot[b // g]] != cr:
                    row[slot[b // g]] = -1
                j = slot[b // g] * g
                grad[j + gt] += 1.0
                if cr >= 0:
                    for q in range(data.allowed_starts[cr], data.allowed_starts[cr + 1]):
                        t = data.allowed_tags[q]
                        grad[j + t] -= marg[i, t]
                else:
                    for t in range(g):
                        grad[j + t] -= marg[i, t]
            if params.order == 1:
                tgrad[prev * (g + 1) + gt] += 1.0
                prev = gt
        for j in range(nt):
            b = touched[j]
            slot[b // g] = -1
            r = row[j] if opt.l2 == 0.0 else -1
            first, end = (data.allowed_starts[r], data.allowed_starts[r + 1]) if r >= 0 else (0, g)
            for q in range(first, end):
                t = data.allowed_tags[q] if r >= 0 else q
                gr = grad[j * g + t] - opt.l2 * theta[b + t]
                grad[j * g + t] = 0.0
                if abs(gr) > opt.min_update:
                    opt.g2[b + t] += gr * gr
                    d = opt.lr * gr / (np.sqrt(opt.g2[b + t]) + opt.eps)
                    theta[b + t] += d
                    opt.u[b + t] += c * d
        if params.order == 1:
            tgrad[prev * (g + 1) + g] += 1.0
            for q in range((g + 1) * (g + 1)):
                gr = tgrad[q] - counts[q // (g + 1), q % (g + 1)] - opt.l2 * theta[off + q]
                tgrad[q] = 0.0
                if gr != 0.0:
                    opt.g2[off + q] += gr * gr
                    d = opt.lr * gr / (np.sqrt(opt.g2[off + q]) + opt.eps)
                    theta[off + q] += d
                    opt.u[off + q] += c * d
        c += 1.0
    return c, total


@njit(cache=True, nogil=True)
def column_predict(data, params, marg_out):
    """int64 (N,) predicted tags of every token: Viterbi (order 1) or per-token argmax (order 0).
    When ``marg_out`` is float64 (N, g) it receives the node marginals p(t_i = t) (shape (0, 0):
    skipped)."""
    N = data.bases.shape[0]
    out = np.full(N, -1, dtype=np.int64)
    want = marg_out.shape[0] == N
    for s in range(data.starts.shape[0] - 1):
        a = data.starts[s]
        un = column_unary(data, params, s)
        n = un.shape[0]
        if params.order == 1:
            trans, _ = _transitions(params)
            best = chain_viterbi(un, trans)
            for i in range(n):
                out[a + i] = best[i]
            if want:
                lm, _ = chain_log_marginals(un, trans)
                for i in range(n):
                    for t in range(params.g):
                        marg_out[a + i, t] = np.exp(lm[i, t])
        else:
            for i in range(n):
                m = NEG_INF
                arg = -1
                for t in range(params.g):
                    if un[i, t] > m:
                        m = un[i, t]
                        arg = t
                out[a + i] = arg
            if want:
                marg, _ = _order0(un)
                for i in range(n):
                    for t in range(params.g):
                        marg_out[a + i, t] = marg[i, t]
    return out
