"""WGSL → IR: the lark frontend (``wgsl.lark``, package data).

A strict LALR lark grammar of the WGSL subset, and a Transformer that maps each rule to one IR
constructor (:mod:`~kvdsl.frontend.transform`, joining the rule groups of
:mod:`~kvdsl.frontend.statements` and :mod:`~kvdsl.frontend.expressions` on the state of
:mod:`~kvdsl.frontend.rules`; number literals and integer const-expressions in
:mod:`~kvdsl.frontend.numbers`; the raw nodes and module declarations it makes besides IR in
:mod:`~kvdsl.frontend.records`). Its ``__default__`` raises, because lark passes unknown rules
through silently. :mod:`~kvdsl.frontend.parser` runs the passes and assembles the kernel, its
interface (bindings, params, structs, workgroup vars) from :mod:`~kvdsl.frontend.interface`, the
entry point's and helpers' attributes from :mod:`~kvdsl.frontend.entry`. Abstract literals are
typed from context (:mod:`~kvdsl.frontend.typer`, with :mod:`~kvdsl.frontend.abstract`'s
abstract numbers and :mod:`~kvdsl.frontend.assign`'s rewriting of swizzle and phony
assignments); errors carry the file, line and column. docs/grammar.md lists the subset."""

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
