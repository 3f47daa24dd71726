"""The base of the parse-tree transformer's rule groups (:mod:`kvdsl.frontend.statements`,
:mod:`kvdsl.frontend.expressions`, and :class:`kvdsl.frontend.transform.ToIR`, which joins them
with the module's declarations): the state of one transform and its located errors."""

from __future__ import annotations

from typing import Any

from lark import Transformer

from kvdsl.frontend.comments import LineComment
from kvdsl.frontend.errors import UnsupportedError


class Rules(Transformer):
    """One transform's state: the file, the override values given, every statement's source
    line, the own-line comments to place, the module consts' integer values (for array sizes),
    the calls' positions and the type aliases. Unknown rules raise (lark would silently pass
    them through)."""

    def __init__(
        self,
        filename: str,
        comments: list[LineComment],
        constants: dict[str, int | float | bool | str] | None = None,
    ) -> None:
        super().__init__()
        self.filename = filename
        # Override values by name or @id, and the keys used of them.
        self.constants = {str(k): v for k, v in (constants or {}).items()}
        self.overridden: set[str] = set()
        self.overridden_names: set[str] = set()
        self.lines: dict[int, int] = {}
        self.comments = [c for c in comments if c.own_line]
        self.claimed: set[int] = set()  # lines of comments placed into a block
        # Integer values, for array sizes; a struct const's integer members by name.
        self.consts: dict[str, int | float | dict[str, int]] = {}
        self.struct_fields: dict[str, tuple[str, ...]] = {}  # structs declared above, by name
        self.calls: dict[int, tuple[int, int]] = {}  # id(FnCall) -> position of its name
        # Type aliases, resolved where they are named (declared above their use, as consts).
        self.aliases: dict[str, Any] = {}
        self.alias_lines: dict[str, int] = {}  # each alias's line
        # The @builtin attributes of struct members: struct -> member -> attribute (those of
        # the struct being read wait in pending_builtins).
        self.member_builtins: dict[str, dict[str, Any]] = {}
        self.pending_builtins: dict[str, Any] = {}
        self.pending_locations: set[int] = set()  # the @location values of that struct
        self.steps: set[int] = set()  # id(Assign) of each `lhs++` and `lhs--`
        # Where a shadowable alias (kvdsl.ir.scope.SHADOWABLE) is named as a constructor,
        # id(RawCtor) -> name.
        self.alias_ctors: dict[int, str] = {}

    def __default__(self, data, children, meta):
        raise NotImplementedError(f"grammar rule '{data}' has no IR constructor")

    def _err(self, message: str, line: int, column: int | None = None):
        return UnsupportedError(message, self.filename, line, column)
