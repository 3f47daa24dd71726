"""The graph of WGSL's uniformity analysis (:mod:`kvdsl.ir.uniformity`): a node per point of
control flow and per value, with an edge to each node it depends on; node 0 is
*MayBeNonUniform*, and a path to it, read back through the nodes' labels, is the chain a
refusal names.
"""

from __future__ import annotations

from collections import deque

MAY_BE_NON_UNIFORM = 0


class Graph:
    """Nodes (ints) with edges to what each depends on, and a label for those a message names."""

    __slots__ = ("out", "label")

    def __init__(self) -> None:
        self.out: list[list[int]] = [[]]  # node 0: MayBeNonUniform
        self.label: dict[int, str] = {}

    def node(self, *to: int, label: str | None = None) -> int:
        n = len(self.out)
        self.out.append(list(to))
        if label is not None:
            self.label[n] = label
        return n

    def join(self, *nodes: int) -> int:
        """A node as uniform as all of ``nodes`` together (one of them when they are one)."""
        if len(nodes) == 2:
            a, b = nodes
            return a if a == b else self.node(a, b)
        first = nodes[0]
        for n in nodes:
            if n != first:
                return self.node(*dict.fromkeys(nodes))
        return first

    def path(self, start: int, goal: int) -> list[int] | None:
        """The nodes of a shortest path from ``start`` to ``goal``, or None."""
        parent = {start: start}
        todo = deque((start,))
        while todo:
            n = todo.popleft()
            if n == goal:
                out = [n]
                while parent[n] != n:
                    n = parent[n]
                    out.append(n)
                return out[::-1]
            for m in self.out[n]:
                if m not in parent:
                    parent[m] = n
                    todo.append(m)
        return None

    def because(self, path: list[int]) -> str:
        """What the labelled nodes of ``path`` say, each depending on the next."""
        seen: list[str] = []
        for n in path:
            text = self.label.get(n)
            if text is None or text in seen:
                continue
            if seen and text.startswith("the condition of ") and seen[-1].startswith(text[17:]):
                continue  # `if (c)`, which some invocations leave...: its condition goes without saying
            seen.append(text)
        return ", which depends on ".join(seen)
