"""The paged inputs a host must not pass, refused before any dispatch on any backend.

A paged kernel (docs/modes.md, "Paged caches") skips a slot or page id of -1 and
clamps nothing else: a slot past the pool writes another allocation's bytes, and two writers of
one slot or page in one dispatch leave whichever the GPU ran last. The interpreter reports
those (``OutOfBounds``, ``RaceError``); the GPU runs them silently. :func:`check_pages` refuses
them first: ``kvdsl run`` applies it to a paged variant's inputs before any backend runs, and
the paged session's host to every input it passes (:mod:`kvdsl.session.paged`).
"""

from __future__ import annotations

import numpy as np

from kvdsl.runtime.errors import PagedInputError


def _places(name: str, ids: np.ndarray, most: int, what: str) -> None:
    """Refuse an id of ``ids`` other than -1 and 0 .. most-1."""
    ids = np.asarray(ids).reshape(-1)
    bad = np.flatnonzero((ids < -1) | (ids >= most))
    if bad.size:
        i = int(bad[0])
        raise PagedInputError(
            f"{name}[{i}] = {int(ids[i])}: expected -1 (none) or a {what} from 0 to {most - 1}"
        )


def pages_written(
    page_table: np.ndarray, seqlens_k: np.ndarray, key_seq: int, page_size: int
) -> list[np.ndarray]:
    """The page ids each sequence's new tokens land in, through a page table ``[B, maxPages]``:
    sequence ``b`` holds ``total = max(seqlens_k[b], -1) + 1`` tokens after the step, the last
    ``min(key_seq, total)`` of them new (:func:`kvdsl.reference.paged.table_places`); a
    position past the table (the contract's refusal) and an entry of -1 write nothing."""
    table = np.asarray(page_table).reshape(len(seqlens_k), -1)
    total = np.maximum(np.asarray(seqlens_k, np.int64), -1) + 1
    fresh = np.minimum(key_seq, total)
    out = []
    for b in range(len(table)):
        first, end = int(total[b] - fresh[b]), int(total[b])
        idx = np.arange(first // page_size, (end - 1) // page_size + 1) if end > first else []
        idx = np.asarray(idx, np.int64)
        entries = table[b, idx[idx < table.shape[1]]]
        out.append(np.unique(entries[entries >= 0]))
    return out


def check_pages(
    pages: int,
    page_size: int,
    *,
    slot_mapping: np.ndarray | None = None,
    read_slots: np.ndarray | None = None,
    page_table: np.ndarray | None = None,
    seqlens_k: np.ndarray | None = None,
    key_seq: int | None = None,
    page_pairs: np.ndarray | None = None,
    live_pages: np.ndarray | None = None,
    shared: np.ndarray | None = None,
) -> None:
    """Refuse, before any dispatch, the paged inputs a host must not pass
    (:class:`~kvdsl.runtime.errors.PagedInputError` naming the input, its value and what is
    allowed) for pools of ``pages`` pages:

    - a slot other than -1 and ``0 .. pages * page_size - 1``, or one slot twice in a step, or
      (with ``shared``, the pages other sequences hold) a slot of a shared page;
    - a slot a read gathers from (``read_slots``, a read's ``slot_mapping``) other than -1 and
      ``0 .. pages * page_size - 1`` (a read may name one slot twice: forks share rows);
    - a page id of the table other than -1 and ``0 .. pages - 1``;
    - with ``seqlens_k`` and ``key_seq`` (an append through the table), a step writing a page
      that two sequences' tables name (or one table twice), or that ``shared`` names: copy it
      first;
    - copy pairs with an id past the pool or below -1 (a pair with a -1 is skipped), a
      destination that is a source, or two pairs onto one page;
    - a compaction list with an id past the pool or below -1, or a page twice.

    Lengths past the table and a pool smaller than the largest id named are the contract's
    (:func:`kvdsl.runtime.contract.check_contract`).
    """
    slots_total = pages * page_size
    held = np.asarray(shared if shared is not None else [], np.int64)
    if page_table is not None:
        _places("page_table", page_table, pages, "page")
    if read_slots is not None:
        _places("slot_mapping", read_slots, slots_total, "slot")
    if slot_mapping is not None:
        _places("slot_mapping", slot_mapping, slots_total, "slot")
        s = np.asarray(slot_mapping).reshape(-1)
        live = s[s >= 0]
        uniq, counts = np.unique(live, return_counts=True)
        if (counts > 1).any():
            dup = int(uniq[counts > 1][0])
            at = [int(i) for i in np.flatnonzero(s == dup)]
            raise PagedInputError(
                f"slot_mapping: slot {dup} is given to tokens {at} in one step: expected "
                "each slot at most once a step (which token lands would be the GPU's choice)"
            )
        both = np.intersect1d(np.unique(live // page_size), held)
        if both.size:
            raise PagedInputError(
                f"slot_mapping: a slot of page {int(both[0])} is written, a page sequences "
                "share: expected a page written by one sequence alone (copy it first)"
            )
    if page_table is not None and seqlens_k is not None and key_seq is not None:
        table = np.asarray(page_table).reshape(len(seqlens_k), -1)
        for b, written in enumerate(pages_written(table, seqlens_k, key_seq, page_size)):
            for page in written:
                owners = [int(x) for x in np.flatnonzero((table == page).any(axis=1))]
                twice = int((table == page).sum())
                if twice > 1 or page in held:
                    who = f"sequences {owners}" if len(owners) > 1 else f"sequence {owners[0]}"
                    raise PagedInputError(
                        f"page_table: page {int(page)} is shared ({who}' tables name it "
                        f"{twice} times{', other sequences hold it' if page in held else ''}) "
                        f"and sequence {b} writes it: expected a page written by one sequence "
                        "alone (copy it to a page of its own first: paged_copy)"
                    )
    if page_pairs is not None:
        pairs = np.asarray(page_pairs).reshape(-1, 2)
        _places("page_pairs", pairs, pages, "page")
        used = pairs[(pairs >= 0).all(axis=1)]  # a pair with a -1 is skipped
        src, dst = used[:, 0], used[:, 1]
        uniq, counts = np.unique(dst, return_counts=True)
        if (counts > 1).any():
            raise PagedInputError(
                f"page_pairs: page {int(uniq[counts > 1][0])} is the destination of "
                f"{int(counts.max())} pairs: expected each destination once a pass"
            )
        both = np.intersect1d(src, dst)
        if both.size:
            raise PagedInputError(
                f"page_pairs: page {int(both[0])} is both a source and a destination in one "
                "pass: expected destinations no pair reads (split the chain into passes)"
            )
    if live_pages is not None:
        live = np.asarray(live_pages).reshape(-1)
        _places("live_pages", live, pages, "page")
        kept = live[live >= 0]
        uniq, counts = np.unique(kept, return_counts=True)
        if (counts > 1).any():
            raise PagedInputError(
                f"live_pages: page {int(uniq[counts > 1][0])} is listed {int(counts.max())} "
                "times: expected each live page once (a compaction maps old ids one to one "
                "onto new ones)"
            )
