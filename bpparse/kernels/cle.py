"""Maximum spanning arborescence (Chu-Liu-Edmonds) in O(n²) on dense graphs (docs/design.md §3).

Tarjan's (1977) path-growing form of Chu-Liu-Edmonds with the correction of Camerini, Fratta and
Maffioli (1979), on a dense matrix of super-node to super-node best edges, as in the dense variant
of Gabow, Galil, Spencer and Tarjan (1986): follow best incoming edges from an unfinished node until
the path reaches a finished node (everything on it is finished) or closes a cycle (contract it: the
edges entering the cycle are reduced by the cycle edge they would replace, the edges leaving it are
merged, O(n) per cycle member). Each super node's best incoming edge is found once by an O(n) scan,
so the contraction phase is O(n²); expansion walks the contraction tree from the top, O(n²) at worst.

Constraints without heuristics, by lexicographic edge weights (an ordered abelian group, on which the
algorithm is exact): every edge weighs (key, score) with an integer key compared first.
- Single root (Gabow & Tarjan 1984; Zmigrod, Vieira & Cotterell 2020): each ROOT edge has key
  -(n+1), so the optimum first minimises the number of ROOT children (1 is always possible on a
  complete graph), then maximises the score among those trees; no re-run per root.
- Forbidden arcs (-inf) have key -1 and score 0: a tree avoids them whenever possible, and when every
  tree needs one, the result is still a tree with as few of them as possible.
Ties: the first best edge in slot order wins, so the output is deterministic.
"""
import numpy as np

from bpparse.jit import njit


@njit(cache=True)
def _better(k1, s1, k2, s2):
    return k1 > k2 or (k1 == k2 and s1 > s2)


@njit(cache=True)
def mst_decode(scores, single_root):
    """Maximum spanning arborescence rooted at 0 (Chu-Liu-Edmonds / Tarjan, dense, O(n²)).

    scores: float64 (n+1, n+1), arc weights (any units: log-potentials, log-odds or marginals),
        [head, child]; the diagonal and column 0 are ignored; -inf forbids an arc; no NaN or +inf.
    single_root: bool, True when ROOT must have exactly one child (exact, not a per-root re-run).
    Returns heads: int64 (n+1,), heads[0] = -1; the tree maximises the sum of scores[heads[m], m]
    (among single-root trees when single_root). Forbidden arcs are used only when every tree needs
    one, and then as few as possible.
    """
    n = scores.shape[0] - 1
    size = n + 1
    # dense best edge between live super nodes, by slot: [from, to]
    key = np.zeros((size, size), dtype=np.int64)
    val = np.zeros((size, size))
    src = np.zeros((size, size), dtype=np.int64)
    dst = np.zeros((size, size), dtype=np.int64)
    for u in range(size):
        for v in range(1, size):
            if u == v:
                continue
            s = scores[u, v]
            k = 0
            if s == -np.inf:
                k -= 1
                s = 0.0
            if u == 0 and single_root:
                k -= n + 1
            key[u, v] = k
            val[u, v] = s
            src[u, v] = u
            dst[u, v] = v
    n_ids = 2 * size
    slot = np.full(n_ids, -1, dtype=np.int64)
    parent = np.full(n_ids, -1, dtype=np.int64)
    done = np.zeros(n_ids, dtype=np.bool_)
    on_path = np.zeros(n_ids, dtype=np.bool_)
    in_cycle = np.zeros(n_ids, dtype=np.bool_)
    enter_key = np.zeros(n_ids, dtype=np.int64)
    enter_val = np.zeros(n_ids)
    enter_src = np.full(n_ids, -1, dtype=np.int64)
    enter_dst = np.full(n_ids, -1, dtype=np.int64)
    member_start = np.zeros(n_ids, dtype=np.int64)
    member_count = np.zeros(n_ids, dtype=np.int64)
    members = np.zeros(n_ids, dtype=np.int64)
    n_members = 0
    slot_id = np.arange(size)  # id living in each slot, -1 once merged away
    for i in range(size):
        slot[i] = i
    done[0] = True
    next_id = size
    path = np.zeros(n_ids, dtype=np.int64)
    tmp_key = np.zeros(size, dtype=np.int64)
    tmp_val = np.zeros(size)
    tmp_src = np.zeros(size, dtype=np.int64)
    tmp_dst = np.zeros(size, dtype=np.int64)

    for start in range(1, size):
        cur = start
        while parent[cur] >= 0:
            cur = parent[cur]
        if done[cur]:
            continue
        top = 0
        path[top] = cur
        on_path[cur] = True
        while True:
            # best incoming edge of cur from any other live super node
            sv = slot[cur]
            best = -1
            for su in range(size):
                if su == sv or slot_id[su] < 0:
                    continue
                if best < 0 or _better(key[su, sv], val[su, sv], key[best, sv], val[best, sv]):
                    best = su
            enter_key[cur] = key[best, sv]
            enter_val[cur] = val[best, sv]
            enter_src[cur] = src[best, sv]
            enter_dst[cur] = dst[best, sv]
            u = slot_id[best]
            if done[u]:
                for i in range(top + 1):
                    done[path[i]] = True
                    on_path[path[i]] = False
                break
            if not on_path[u]:
                top += 1
                path[top] = u
                on_path[u] = True
                cur = u
                continue
            # cycle: the path from u to cur; contract it into a new super node c in u's slot
            c = next_id
            next_id += 1
            member_start[c] = n_members
            first = top
            while path[first] != u:
                first -= 1
            for i in range(first, top + 1):
                m = path[i]
                members[n_members] = m
                n_members += 1
                parent[m] = c
                on_path[m] = False
                in_cycle[m] = True
            member_count[c] = top - first + 1
            sc = slot[u]
            for sx in range(size):
                x = slot_id[sx]
                if x < 0 or in_cycle[x]:
                    continue
                # into c from x: reduced by the cycle edge it would replace
                bk = 0
                bv = 0.0
                found = False
                for i in range(first, top + 1):
                    m = path[i]
                    sm = slot[m]
                    k = key[sx, sm] - enter_key[m]
                    w = val[sx, sm] - enter_val[m]
                    if not found or _better(k, w, bk, bv):
                        found = True
                        bk = k
                        bv = w
                        tmp_src[sx] = src[sx, sm]
                        tmp_dst[sx] = dst[sx, sm]
                tmp_key[sx] = bk
                tmp_val[sx] = bv
            for sx in range(size):
                x = slot_id[sx]
                if x < 0 or in_cycle[x]:
                    continue
                key[sx, sc] = tmp_key[sx]
                val[sx, sc] = tmp_val[sx]
                src[sx, sc] = tmp_src[sx]
                dst[sx, sc] = tmp_dst[sx]
            for sx in range(1, size):
                x = slot_id[sx]
                if x < 0 or in_cycle[x]:
                    continue
                # out of c to x: the best edge from any member
                found = False
                for i in range(first, top + 1):
                    sm = slot[path[i]]
                    if not found or _better(key[sm, sx], val[sm, sx], bk, bv):
                        found = True
                        bk = key[sm, sx]
                        bv = val[sm, sx]
                        tmp_src[sx] = src[sm, sx]
                        tmp_dst[sx] = dst[sm, sx]
                tmp_key[sx] = bk
                tmp_val[sx] = bv
            for sx in range(1, size):
                x = slot_id[sx]
                if x < 0 or in_cycle[x]:
                    continue
                key[sc, sx] = tmp_key[sx]
                val[sc, sx] = tmp_val[sx]
                src[sc, sx] = tmp_src[sx]
                dst[sc, sx] = tmp_dst[sx]
            for i in range(first, top + 1):
                m = path[i]
                in_cycle[m] = False
                slot_id[slot[m]] = -1
            slot[c] = sc
            slot_id[sc] = c
            top = first
            path[top] = c
            on_path[c] = True
            cur = c

    # expansion: a super node entered by edge (a -> b) passes it to the member containing b; every
    # other member keeps its own cycle edge
    in_src = np.full(next_id, -1, dtype=np.int64)
    in_dst = np.full(next_id, -1, dtype=np.int64)
    for sx in range(1, size):
        x = slot_id[sx]
        if x >= 0:
            in_src[x] = enter_src[x]
            in_dst[x] = enter_dst[x]
    for c in range(next_id - 1, size - 1, -1):
        y = in_dst[c]
        while parent[y] != c:
            y = parent[y]
        for i in range(member_start[c], member_start[c] + member_count[c]):
            m = members[i]
            if m == y:
                in_src[m] = in_src[c]
                in_dst[m] = in_dst[c]
            else:
                in_src[m] = enter_src[m]
                in_dst[m] = enter_dst[m]
    heads = np.full(size, -1, dtype=np.int64)
    for v in range(1, size):
        heads[v] = in_src[v]
    return heads
