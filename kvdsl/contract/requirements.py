"""What each requirement a kernel states keeps true, in words: index.json's ``requires`` gives
each requirement with its sentence."""

from __future__ import annotations

from kvdsl.contract.modes import CONTRACTS

#: A kernel's requirement (:attr:`kvdsl.ir.tree.Kernel.requires`, by its text) → what it
#: keeps true, in words: index.json's ``requires`` gives each with its sentence.
REQUIREMENTS: dict[str, str] = {
    "keySeq >= 1": "a dispatch brings at least one new token per batch (the kernel finds a row's"
    " batch by dividing by keySeq)",
    "seq >= 1": "seq is at least 1 (the kernel finds a row's batch by dividing by seq)",
    "keySeq <= seq": "the new tokens fit the cache: at most seq (its capacity) per batch",
    "seq <= pastSeq + keySeq (the present holds the past rows, then the new tokens)": "the"
    " present's rows per head are at most the past rows and the new tokens it is built from",
    "seqlens_k.max + 1 <= maxPages * page_size": "every sequence's tokens up to its last"
    " (seqlens_k + 1) fit its row of page_table: maxPages pages of page_size tokens",
    "seq <= maxPages * page_size": "the positions gathered per sequence fit its row of"
    " page_table: maxPages pages of page_size tokens",
    "maxPages >= 1": "each sequence's row of page_table has at least one entry",
}

#: The modes' own requirement sentences (:attr:`kvdsl.contract.record.Contract.says`), each once.
_OWN = tuple(dict.fromkeys(c.says for c in CONTRACTS.values() if c.says is not None))


def says(words: str) -> str | None:
    """What a kernel's requirement ``words`` keeps true: :data:`REQUIREMENTS`'s sentence, or that
    of a mode's contract (:attr:`kvdsl.contract.record.Contract.says`, e.g.
    :func:`kvdsl.contract.attend.says`); None for a requirement none states."""
    return REQUIREMENTS.get(words) or next((said for f in _OWN if (said := f(words))), None)
