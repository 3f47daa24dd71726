"""WGSL → IR: the lark frontend (``wgsl.lark``, package data).

A strict LALR lark grammar of the WGSL subset, and a Transformer that maps each rule to one IR
constructor (:mod:`~kvdsl.frontend.transform`; the raw nodes and module declarations it makes
besides IR in :mod:`~kvdsl.frontend.records`). Its ``__default__`` raises, because lark passes
unknown rules through silently. Abstract literals are typed from context; errors carry the file,
line and column. docs/grammar.md lists the subset."""

from kvdsl.frontend.errors import FrontendError, UnsupportedError, WgslSyntaxError, WgslTypeError
from kvdsl.frontend.parser import parse, parse_with_lines

__all__ = [
    "FrontendError",
    "UnsupportedError",
    "WgslSyntaxError",
    "WgslTypeError",
    "parse",
    "parse_with_lines",
]
