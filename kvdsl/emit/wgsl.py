"""The WGSL emitter: IR → deterministic, readable WGSL.

Layout of a module, always in this order: ``enable f16;`` (only when the kernel mentions f16),
``enable subgroups;`` (only when it uses a subgroup builtin value or function; both decided
from the IR by :func:`kvdsl.ir.features.features`), the params struct, the storage bindings in
declaration order followed by the params uniform and any other uniforms (all ``@group(0)``,
numbered from 0), module
consts, helper functions, then the documented entry point ``main``. Indentation is two spaces.
Parentheses are printed only where WGSL's grammar needs them, as the op table's levels say (see
:mod:`kvdsl.ir.ops`).

WGSL quirks handled here, each once:
- integer literals always carry their suffix (``3u``, ``-2i``); i32's minimum has no literal
  spelling (``2147483648i`` overflows before the minus), so it prints as ``i32(-2147483648)``;
- float literals are the shortest text that reads back to the same f32/f16 value, suffixed
  ``f``/``h``;
- a negative literal is a unary minus in WGSL, so it binds like one;
- ``select(f, t, c)`` takes the false value first: the IR keeps WGSL's argument order.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.features import enables
from kvdsl.ir.show import call_text, statement
from kvdsl.ir.types import RuntimeArray, Scalar, Struct, array_leaf, bool_, f16, i32, u32

INDENT = "  "
#: The trailing comment that names a binding's host data type (``// host: f16``).
HOST_DATA = "// host: "


def format_literal(value: int | float | bool, ty: Scalar) -> str:
    """The WGSL spelling of a literal of type ``ty``."""
    if ty is u32 or ty == u32:
        return f"{value}u"
    if ty is bool_ or ty == bool_:
        return "true" if value else "false"
    if ty is i32 or ty == i32:
        return "i32(-2147483648)" if value == -(2**31) else f"{value}i"
    v = (np.float16 if ty == f16 else np.float32)(value)
    if not np.isfinite(v):
        raise ValueError(f"{ty} literal {value!r} has no WGSL spelling")
    a = abs(float(v))
    if ty == f16 and a != 0:
        # Every digit of the value: WGSL lets an implementation round an f16 literal's decimal
        # either way, and Tint rounds toward zero where naga rounds to nearest, so the shortest
        # decimal (31.62h for 31.625) means another value to Tint (31.609375); an f16's exact
        # decimal is short (at most 25 significant digits, for the least subnormals).
        exact = Decimal(float(v))
        text = format(exact, "f" if 1e-4 <= a < 1e7 else "e")
        return (text if "." in text or "e" in text else text + ".0") + "h"
    if a == 0 or 1e-4 <= a < 1e7:
        text = np.format_float_positional(v, unique=True, trim="0")
    else:
        text = np.format_float_scientific(v, unique=True, trim="-")
        if abs(float(text)) > float(np.finfo(v.dtype).max):
            # The shortest spelling of the type's largest values (3.4028235e+38) reads back as
            # that value, but as a decimal it lies past it, and Tint refuses it: spell the
            # value itself.
            text = np.format_float_scientific(v, unique=False, precision=16, trim="-")
    return text + ("h" if ty == f16 else "f")


def _level(e: ir.Expr) -> int:
    """The precedence level of a non-binary operand (:func:`_operand` handles binaries)."""
    match e:
        case ir.Lit(value, ty) if (
            ty != bool_ and value < 0 and not (ty == i32 and value == -(2**31))
        ):
            return ops.UNARY
        case ir.Unary() | ir.AddressOf() | ir.Deref():
            return ops.UNARY
        case _:
            return ops.PRIMARY


def emit_expr(e: ir.Expr) -> str:
    """One expression with minimal parentheses."""
    if type(e) is ir.Name:  # the most common expression by far
        return e.name
    match e:
        case ir.Binary(op, a, b):
            info = ops.info(op)
            lhs = _operand(a, info.lhs_max, op if info.chain else None)
            rhs = _operand(b, info.rhs_max, None)
            if (op is ops.Op.LT or op is ops.Op.LE) and type(b) is ir.Binary and b.op is ops.Op.SHR:
                # "a < b >> c": WGSL reads "a<" ... ">" as a template list (naga does).
                rhs = f"({rhs})"
            return f"{lhs} {info.spelling} {rhs}"
        case ir.Lit(value, ty):
            return format_literal(value, ty)
        case ir.Index(base, index):
            return f"{_operand(base, ops.PRIMARY, None)}[{emit_expr(index)}]"
        case ir.Member(base, name):
            return f"{_operand(base, ops.PRIMARY, None)}.{name}"
        case ir.AtomicCall(fn, target, args):
            # Through a pointer value, ``atomicAdd(p, 1u)``; else the element's address.
            ptr = target.x if type(target) is ir.Deref else ir.Name("&" + emit_expr(target))
            return f"atomic{fn}({_arguments((ptr,) + args)})"
        case ir.Unary(op, x):
            inner = _operand(x, ops.UNARY, None)
            # "- -x" must not print as the decrement token "--x".
            sep = " " if inner.startswith(ops.info(op).spelling) else ""
            return f"{ops.info(op).spelling}{sep}{inner}"
        case ir.AddressOf(x):
            return f"&{_operand(x, ops.UNARY, None)}"
        case ir.Deref(x):
            return f"*{_operand(x, ops.UNARY, None)}"
        case ir.Name(name):
            return name
    text = call_text(e, emit_expr, _arguments)
    if text is not None:
        return text
    raise TypeError(f"emit: not an expression: {e!r}")


def _arguments(args: tuple[ir.Expr, ...]) -> str:
    """A call's or constructor's arguments, comma-separated. An argument with a ``<`` relation
    at its top level is parenthesised unless it is the last: WGSL finds template lists before
    it parses (the spec's template-list discovery), and there ``x < ...`` opens a candidate list
    that any ``>`` at the same nesting depth closes, commas notwithstanding, so
    ``select(vi < 0i, t, 0u >= n)`` reads as ``vi<...>`` (Tint and naga both refuse it). The
    closing parenthesis of the call ends a candidate, so the last argument needs none."""
    texts = [emit_expr(a) for a in args]
    for i in range(len(texts) - 1):
        if _top_level_less(texts[i]):
            texts[i] = f"({texts[i]})"
    return ", ".join(texts)


def _top_level_less(text: str) -> bool:
    """Whether the printed expression ``text`` holds a ``<`` relation outside every bracket
    (the printer spaces binary operators, never a type's template list)."""
    if " < " not in text:
        return False
    depth = 0
    for i, c in enumerate(text):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "<" and depth == 0 and text[i - 1 : i + 2] == " < ":
            return True
    return False


def _operand(e: ir.Expr, max_level: int, chain: ops.Op | None) -> str:
    cls = type(e)
    if cls is ir.Name:  # a name is primary: never parenthesised
        return e.name
    if cls is ir.Lit and e.ty is u32 and not e.value < 0:  # nor is a u32 literal
        return f"{e.value}u"
    text = emit_expr(e)
    if cls is ir.Binary:
        op = e.op
        if ops.info(op).level <= max_level or op == chain:
            return text
        return f"({text})"
    return text if _level(e) <= max_level else f"({text})"


class Emitter:
    """Prints statements into a list of lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    def block(self, body: tuple[ir.Stmt, ...], depth: int) -> None:
        indent = INDENT * depth
        append = self.lines.append
        for s in body:
            # Lets and plain assignments are most statements: printed here without a dispatch.
            cls = type(s)
            if cls is ir.Let:
                append(f"{indent}let {s.name} = {emit_expr(s.value)};")
            elif cls is ir.Assign and s.op is None:
                append(f"{indent}{emit_expr(s.target)} = {emit_expr(s.value)};")
            else:
                self.stmt(s, depth)

    def stmt(self, s: ir.Stmt, depth: int) -> None:
        match s:
            case ir.If():
                self._if(s, depth, "if")
                self.line(depth, "}")
            case ir.For(init, cond, update, body):
                head = "; ".join(
                    (
                        inline(init),
                        "" if cond is None else emit_expr(cond),
                        inline(update),
                    )
                ).rstrip()
                self.line(depth, f"for ({head}) {{")
                self.block(body, depth + 1)
                self.line(depth, "}")
            case ir.Loop(body, continuing, break_if):
                self.line(depth, "loop {")
                self.block(body, depth + 1)
                if continuing or break_if is not None:
                    self.line(depth + 1, "continuing {")
                    self.block(continuing, depth + 2)
                    if break_if is not None:
                        self.line(depth + 2, f"break if {emit_expr(break_if)};")
                    self.line(depth + 1, "}")
                self.line(depth, "}")
            case ir.Switch(selector, cases):
                self.line(depth, f"switch {emit_expr(selector)} {{")
                for case in cases:
                    labels = ", ".join(
                        "default" if e is None else emit_expr(e) for e in case.selectors
                    )
                    head = "default" if labels == "default" else f"case {labels}"
                    self.line(depth + 1, f"{head} {{")
                    self.block(case.body, depth + 2)
                    self.line(depth + 1, "}")
                self.line(depth, "}")
            case ir.Block(body):
                self.line(depth, "{")
                self.block(body, depth + 1)
                self.line(depth, "}")
            case ir.Comment(text):
                self.line(depth, f"// {text}".rstrip())
            case _:
                self.line(depth, inline(s) + ";")

    def _if(self, s: ir.If, depth: int, keyword: str) -> None:
        self.line(depth, f"{keyword} ({emit_expr(s.cond)}) {{")
        self.block(s.then, depth + 1)
        if len(s.orelse) == 1 and isinstance(s.orelse[0], ir.If):
            # An else holding exactly one if prints as "else if".
            self._if(s.orelse[0], depth, "} else if")
        elif s.orelse:
            self.line(depth, "} else {")
            self.block(s.orelse, depth + 1)


def inline(s: ir.Stmt | None) -> str:
    """A simple statement without its semicolon (also the parts of a for header, and the
    statement the interpreter names in its errors)."""
    if s is None:
        return ""
    text = statement(s, emit_expr)
    if text is not None:
        return text
    raise TypeError(f"emit: not a simple statement: {s!r}")


def memory_structs(kernel: ir.Kernel) -> list[str]:
    """The declarations of the structs storage bindings, workgroup arrays and the uniform's
    members hold, each once, in the order the bindings, then the workgroup vars, then the
    uniform first name them; then those of values."""
    seen: dict[str, Struct] = {}

    def add(t) -> None:  # a struct, then the structs its members hold, depth first
        t = array_leaf(t.elem if isinstance(t, RuntimeArray) else t)
        if isinstance(t, Struct) and t.name not in seen:
            seen[t.name] = t
            for _, member in t.fields:
                add(member)

    for t in [b.elem for b in kernel.bindings] + [w.ty for w in kernel.workgroup_vars]:
        add(t)  # a fixed-size storage array of structs: array<B, 4>
    for _, t in kernel.params.fields if kernel.params is not None else ():
        add(t)  # the structs the uniform's members are, or hold
    for u in kernel.uniforms:
        add(u.ty)  # the other uniforms' structs
    # Then the structs only values have, in the order the module consts, the helpers, then
    # the entry point first name them (the params block and builtins' results are not declared).
    params = kernel.params.name if kernel.params is not None else None
    for x in ir.walk((kernel.consts, kernel.functions, kernel.body)):
        if isinstance(x, Struct) and x.name not in seen and x.name != params:
            if not x.name.startswith("__"):
                seen[x.name] = x
    out = []
    for st in seen.values():
        out.append(f"struct {st.name} {{")
        out += struct_members(st)
        out += ["}", ""]
    return out


def struct_members(st: Struct) -> list[str]:
    """Struct ``st``'s member lines, each with its ``@align(n)`` and ``@size(n)``."""
    out = []
    for k, (n, t) in enumerate(st.fields):
        align, size = st.layout[k] if st.layout else (None, None)
        attrs = "" if align is None else f"@align({align}) "
        attrs += "" if size is None else f"@size({size}) "
        out.append(f"{INDENT}{attrs}{n}: {t},")
    return out


def emit(kernel: ir.Kernel) -> str:
    """The kernel as a complete WGSL module."""
    out: list[str] = []
    if kernel.params is not None:
        out.append(f"struct {kernel.params.name} {{")
        out += struct_members(kernel.params)
        out += ["}", ""]
    out += memory_structs(kernel)
    for i, b in enumerate(kernel.bindings):
        ty = b.elem if b.whole else f"array<{b.elem}>"
        decl = f"@group(0) @binding({i}) var<storage, {b.access}> {b.name}: {ty};"
        # The host's element type, when not the WGSL one, survives a parse (kvdsl.frontend).
        out.append(decl if b.data is None else f"{decl} {HOST_DATA}{b.data}")
    if kernel.params is not None:
        n = len(kernel.bindings)
        out.append(f"@group(0) @binding({n}) var<uniform> params: {kernel.params.name};")
    n = len(kernel.bindings) + (kernel.params is not None)
    for n, u in enumerate(kernel.uniforms, n):
        out.append(f"@group(0) @binding({n}) var<uniform> {u.name}: {u.ty};")
    first = len(kernel.bindings) + (kernel.params is not None) + len(kernel.uniforms)
    for n, t in enumerate(kernel.textures, first):
        out.append(f"@group(0) @binding({n}) var {t.name}: {t.ty};")
    if kernel.bindings or kernel.params is not None or kernel.uniforms or kernel.textures:
        out.append("")
    for w in kernel.workgroup_vars:
        out.append(f"var<workgroup> {w.name}: {w.ty};")
    for v in kernel.private_vars:
        init = "" if v.init is None else f" = {emit_expr(v.init)}"
        out.append(f"var<private> {v.name}: {v.ty}{init};")
    if kernel.workgroup_vars or kernel.private_vars:
        out.append("")
    for c in kernel.consts:
        if c.comment:
            out += [f"// {line}".rstrip() for line in c.comment.splitlines()]
        out.append(f"const {c.name}: {c.ty} = {emit_expr(c.value)};")
    out += [f"const_assert {emit_expr(a)};" for a in kernel.asserts]
    if kernel.consts or kernel.asserts:
        out.append("")
    for fn in kernel.functions:
        params = ", ".join(f"{n}: {t}" for n, t in fn.params)
        ret = "" if fn.ret is None else f" -> {fn.ret}"
        em = Emitter()
        em.block(fn.body, 1)
        out.append(f"fn {fn.name}({params}){ret} {{")
        out += em.lines
        out += ["}", ""]
    out += [f"// {line}".rstrip() for line in kernel.doc]
    x, y, z = kernel.workgroup_size
    size = kernel.workgroup_size_name or str(x)
    if (y, z) != (1, 1):
        size += f", {y}, {z}"
    out.append(f"@compute @workgroup_size({size})")
    args = [
        f"@builtin({builtin}) {name}: {ir.builtin_type(builtin)}"
        for name, builtin in kernel.builtins
    ]
    if len(args) > 1:
        out.append("fn main(")
        out += [f"{INDENT}{a}," for a in args]
        out.append(") {")
    else:
        out.append(f"fn main({''.join(args)}) {{")
    em = Emitter()
    em.block(kernel.body, 1)
    out += em.lines
    out.append("}")
    text = "\n".join(out) + "\n"
    head = [f"enable {e};" for e in enables(kernel)] + [f"{d};" for d in kernel.directives]
    return "\n".join(head) + "\n\n" + text if head else text
