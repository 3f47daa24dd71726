"""WGSL's atomic builtins over the invocations of one step, in their order, vectorised
(:func:`atomic_sequence`; :meth:`kvdsl.interp.memory.Memory.atomic` gives it each step's
operations)."""

from __future__ import annotations

import numpy as np

from kvdsl.interp.errors import InterpError


def atomic_sequence(fn: str, data: np.ndarray, pos: np.ndarray, args: list[np.ndarray]):
    """Apply atomic ``fn`` at ``data[pos[k]]`` with ``args[..][k]`` for k = 0, 1, ... in
    order; (each operation's old value, whether each compare-exchange exchanged) in the
    operations' order. Vectorised: the lanes are grouped by element (a stable sort keeps their
    order within an element), and each element's run is a prefix scan of its operator."""
    order = np.argsort(pos, kind="stable")
    sp = pos[order]
    k = len(sp)
    start = np.ones(k, bool)
    start[1:] = sp[1:] != sp[:-1]
    last = np.ones(k, bool)
    last[:-1] = start[1:]
    seg = np.cumsum(start) - 1
    first = np.flatnonzero(start)
    dtype = data.dtype
    init = data[sp]
    words = init.view(np.uint32)
    if fn == "Load":
        old = init
    elif fn == "CompareExchangeWeak":
        cmp_, new = (a[order].astype(dtype, copy=False) for a in args)
        rank = np.arange(k) - first[seg]
        cur = data[sp[first]].copy()
        old = np.empty(k, dtype)
        exchanged = np.empty(k, bool)
        for r in range(int(rank.max()) + 1):
            sel = np.flatnonzero(rank == r)
            g = seg[sel]
            c = cur[g]
            ok = c == cmp_[sel]
            old[sel], exchanged[sel] = c, ok
            cur[g] = np.where(ok, new[sel], c)
        data[sp[first]] = cur
        out, flags = np.empty(k, dtype), np.empty(k, bool)
        out[order], flags[order] = old, exchanged
        return out, flags
    else:
        v = args[0][order].astype(dtype, copy=False)
        u = v.view(np.uint32)
        if fn in ("Store", "Exchange"):
            prev = np.empty_like(v)
            prev[1:] = v[:-1]
            old = np.where(start, init, prev)
            final = v
        elif fn in ("Add", "Sub"):
            w = u.astype(np.uint64)
            excl = np.cumsum(w) - w  # modulo 2**64, so exact modulo 2**32
            pre = (excl - excl[first][seg]).astype(np.uint32)
            with np.errstate(over="ignore"):
                ow = words + pre if fn == "Add" else words - pre
                fw = ow + u if fn == "Add" else ow - u
            old, final = ow.view(dtype), fw.view(dtype)
        elif fn in ("Max", "Min"):
            # Each element's run is a running max (min) of keys whose high half is the run's
            # number (its complement for min), so no run reads into the next.
            flip = np.uint32(0x80000000) if dtype == np.int32 else np.uint32(0)
            key = (u ^ flip).astype(np.uint64)
            runs = seg.astype(np.uint64) if fn == "Max" else (seg.max() - seg).astype(np.uint64)
            acc = (np.maximum if fn == "Max" else np.minimum).accumulate((runs << 32) | key)
            incl = (acc & np.uint64(0xFFFFFFFF)).astype(np.uint32) ^ flip
            ex = np.empty_like(incl)
            ex[1:] = incl[:-1]
            pick = np.maximum if fn == "Max" else np.minimum
            prefix = ex.view(dtype)
            old = np.where(start, init, pick(init, prefix))
            final = pick(old, v)
        elif fn == "Xor":
            acc = np.bitwise_xor.accumulate(u)
            excl = acc ^ u
            old = (words ^ excl ^ excl[first][seg]).view(dtype)
            final = (old.view(np.uint32) ^ u).view(dtype)
        elif fn in ("Or", "And"):
            # Bit by bit: whether an earlier lane of the run set (cleared) it.
            x = u if fn == "Or" else ~u
            pre = np.zeros(k, np.uint32)
            for bit in range(32):
                b = ((x >> np.uint32(bit)) & np.uint32(1)).astype(np.int64)
                excl = np.cumsum(b) - b
                seen = (excl - excl[first][seg]) > 0
                pre |= seen.astype(np.uint32) << np.uint32(bit)
            ow = words | pre if fn == "Or" else words & ~pre
            old = ow.view(dtype)
            final = (ow | u if fn == "Or" else ow & u).view(dtype)
        else:
            raise InterpError(f"no atomic builtin atomic{fn}")
        data[sp[last]] = final[last]
        if fn == "Store":
            return None, None
    out = np.empty(k, dtype)
    out[order] = old
    return out, None
