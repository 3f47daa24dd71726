"""A paged session's page bookkeeping, what a serving engine's block manager owns: one page
table per sequence (``-1`` where it has no page), a reference count per page and the free list
(:class:`PageAllocator`). It moves no row: the session dispatches the copies and compactions
its answers call for."""

from __future__ import annotations

import numpy as np

from kvdsl.session.formats import SessionError

#: Pages of each pool that no sequence can own at any step (checked untouched).
SPARE = 2


class PageAllocator:
    """The tables of ``batch`` sequences of ``max_pages`` entries over a pool of ``pages``
    pages, the free list in the order ``rng`` draws (the last :data:`SPARE` pages are never
    taken)."""

    def __init__(self, pages: int, batch: int, max_pages: int, rng: np.random.Generator) -> None:
        self.pages = pages
        self.rng = rng
        self.table = np.full((batch, max_pages), -1, np.int32)
        self.refs = np.zeros(pages, np.int64)
        self.free = [int(p) for p in rng.permutation(pages)]

    def take(self) -> int:
        """A page from the free list, held once."""
        if len(self.free) <= SPARE:
            raise SessionError(
                f"pages={self.pages}: no free page left (the last {SPARE} stay free); give "
                "more pages, a window or fewer sequences"
            )
        page = self.free.pop()
        self.refs[page] = 1
        return page

    def drop(self, page: int) -> None:
        """One hold of ``page`` released; the page is free once none is left."""
        self.refs[page] -= 1
        assert self.refs[page] >= 0, page
        if self.refs[page] == 0:
            self.free.append(page)

    def release(self, b: int) -> None:
        """Sequence ``b``'s pages released, its table emptied."""
        for page in self.table[b]:
            if page >= 0:
                self.drop(int(page))
        self.table[b] = -1

    def release_pages(self, pages: np.ndarray) -> None:
        """One hold of each page of ``pages`` (``-1``: none) released."""
        for page in pages:
            if page >= 0:
                self.drop(int(page))

    def share(self, src: int, dst: int) -> None:
        """Sequence ``dst`` releases its pages and holds ``src``'s."""
        self.release(dst)
        self.table[dst] = self.table[src]
        for page in self.table[src]:
            if page >= 0:
                self.refs[page] += 1

    def writable(self, first: np.ndarray, end: np.ndarray, page_size: int) -> list[tuple[int, int]]:
        """Pages of its own for positions ``first[b] .. end[b] - 1`` of each sequence ``b``: a
        page taken where its table has none, and a shared one replaced by a page taken
        (copy-on-write); the ``(shared, taken)`` pairs whose rows the session copies."""
        pairs = []
        for b in range(len(first)):
            if end[b] <= first[b]:
                continue
            for i in range(int(first[b]) // page_size, (int(end[b]) - 1) // page_size + 1):
                page = int(self.table[b, i])
                if page < 0:
                    self.table[b, i] = self.take()
                elif self.refs[page] > 1:
                    new = self.take()
                    pairs.append((page, new))
                    self.drop(page)
                    self.table[b, i] = new
        return pairs

    def owned(self) -> np.ndarray:
        """The pages the tables hold, each once, in the order the tables first name them."""
        seen: list[int] = []
        for page in self.table.reshape(-1):
            if page >= 0 and page not in seen:
                seen.append(int(page))
        return np.array(seen, np.int32)

    def compacted(self, live: np.ndarray) -> None:
        """The tables and counts after pages ``live`` moved to ``0 .. len(live) - 1``; the
        free list the rest, in a new order."""
        n = len(live)
        new_id = np.full(self.pages, -1, np.int32)
        new_id[live] = np.arange(n, dtype=np.int32)
        self.table = np.where(self.table >= 0, new_id[np.maximum(self.table, 0)], -1)
        refs = np.zeros(self.pages, np.int64)
        refs[:n] = self.refs[live]
        self.refs = refs
        self.free = [int(p) for p in self.rng.permutation(np.arange(n, self.pages))]

    def check(self) -> None:
        """The counts are the tables' and the free list the pages no table holds."""
        refs = np.zeros(self.pages, np.int64)
        np.add.at(refs, self.table[self.table >= 0], 1)
        assert np.array_equal(refs, self.refs), "the page counts drifted from the tables"
        assert sorted(self.free) == [int(p) for p in np.flatnonzero(refs == 0)], "free list"
