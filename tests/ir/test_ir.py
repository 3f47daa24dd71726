"""The IR: op table completeness, builder typing and literal adaptation, verifier rejections."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from kvdsl.emit import emit
from kvdsl.ir import (
    BuildError,
    Dispatch,
    KernelBuilder,
    Op,
    VerifyError,
    array,
    clamp,
    construct,
    convert,
    f16,
    f32,
    i32,
    select,
    u32,
    vec,
    verify,
)
from kvdsl.ir import ops
from kvdsl.ir.tree import (
    Assign,
    Binary,
    Break,
    Call,
    Continue,
    Convert,
    FnCall,
    For,
    Function,
    If,
    Index,
    Let,
    Lit,
    Loop,
    Member,
    Name,
    Return,
    Texture,
    TextureLoad,
    TextureStore,
    Var,
    WorkgroupVar,
)
from kvdsl.ir.types import (
    Array,
    Mat,
    RuntimeArray,
    SampledTexture,
    Scalar,
    StorageTexture,
    Struct,
    Vec,
    bool_,
    mat,
)
from kvdsl.ir.show import show
from kvdsl.ir.scope import SHADOWABLE

# vec2<f32>: pack2x16float; vec3<f32>: cross; matrices: transpose, determinant, + - *
CANDIDATES = [f32, u32, i32, bool_, vec(4, f32), vec(2, f32), vec(3, f32), mat(3, 3, f32)]
CANDIDATES += [mat(2, 3, f32)]


def _operands(op, ty):
    row = ops.TABLE[op]
    if op == Op.SELECT:
        return (ty, ty, bool_)
    if op in (Op.SHL, Op.SHR, Op.SUBGROUP_SHUFFLE_XOR):
        return (ty, u32)
    if row.operands is not None:  # "T" the candidate, "I" i32 of its shape, else a fixed type
        shape = (lambda s: vec(ty.n, s)) if isinstance(ty, Vec) else (lambda s: s)
        return tuple(ty if k == "T" else shape(i32) if k == "I" else k for k in row.operands)
    return (ty,) * row.arity


def test_every_op_row_is_complete():
    for op in Op:
        row = ops.TABLE[op]
        assert (
            row.spelling
            and row.arity in ((0, 1) if op is Op.SUBGROUP_ELECT else (1, 2, 3, 4))
            and row.kind in ("unary", "binary", "builtin")
        )
        assert 0 <= row.level <= ops.LOGIC and row.lhs_max <= ops.LOGIC and row.rhs_max <= ops.LOGIC
        accepted = []
        for ty in CANDIDATES:
            try:
                accepted.append((ty, row.typing(_operands(op, ty))))
            except ops.OpTypeError:
                pass
        assert accepted, f"{op}: typing accepts none of {CANDIDATES}"
        for ty, result in accepted:
            args = [
                (
                    np.array([3, 5], dtype=t.dtype)
                    if isinstance(t, Scalar)
                    else (
                        np.ones((2, t.c, t.r), t.elem.dtype)
                        if isinstance(t, Mat)
                        else np.ones((2, t.n), t.scalar.dtype)
                    )
                )
                for t in _operands(op, ty)
            ]
            if row.subgroup:  # reads other invocations: the interpreter evaluates it (tested there)
                with pytest.raises(TypeError, match="only the interpreter"):
                    row.impl(*args)
                continue
            got = row.impl(*args)
            if isinstance(result, Struct):  # frexp's and modf's result: each field's type
                for name, fty in result.fields:
                    assert got[name].dtype == fty.scalar.dtype, f"{op} on {ty}: field {name}"
                continue
            out = np.asarray(got)
            want = result.scalar.dtype
            assert out.dtype == want, f"{op} on {ty}: numpy gives {out.dtype}, typing says {result}"


def test_spellings_are_unique_per_kind():
    seen = {}
    for op, row in ops.TABLE.items():
        key = (row.kind == "builtin", row.arity, row.spelling)
        assert key not in seen, f"{op} and {seen.get(key)} share {key}"
        seen[key] = op


def kernel_with(body, bindings=(("out", f32, "read_write"),)):
    """A minimal kernel around ``body(kb, bufs)``."""
    kb = KernelBuilder("k", 4)
    bufs = [kb.binding(n, t, a) for n, t, a in bindings]
    body(kb, *bufs)
    return kb.build()


def test_literals_adapt_to_the_other_operand():
    kb = KernelBuilder("k", 4)
    i = kb.gid.x
    assert (i * 3 + 1).ty == u32
    assert (i * 3 + 1).node == Binary(
        Op.ADD, Binary(Op.MUL, Member(Name("gid"), "x"), Lit(3, u32)), Lit(1, u32)
    )
    x = i.to(f32)
    assert (x * 2).node.b == Lit(2.0, f32)
    assert (0.5 * x).node.a == Lit(0.5, f32)
    assert (i << 4).node.b == Lit(4, u32)
    assert (i.to(i32) >> 31).node.b == Lit(31, u32)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda kb: kb.gid.x + kb.gid.x.to(i32), "+ operands of different types: u32, i32"),
        (lambda kb: kb.gid.x + 0.5, "float literal 0.5 cannot become u32"),
        (lambda kb: kb.gid.x.to(i32) + 2**31, "literal 2147483648 does not fit i32"),
        (lambda kb: kb.gid.x - -1, "literal -1 does not fit u32"),
        (lambda kb: select(1.0, 2, kb.gid.x < 3), "select branches differ: f32 and i32"),
        (lambda kb: -kb.gid.x, "- expects signed numeric operands, got u32"),
        (lambda kb: kb.gid.x << kb.gid.x.to(i32), "shift amount must be u32, got i32"),
        (lambda kb: kb.gid.member("q"), "invalid swizzle 'q' of vec3<u32>"),
    ],
)
def test_builder_rejects_at_build_time(make, message):
    kb = KernelBuilder("k", 4)
    with pytest.raises(BuildError) as err:
        make(kb)
    assert message in str(err.value)


def test_builder_rejects_python_truth():
    kb = KernelBuilder("k", 4)
    with pytest.raises(BuildError, match="no Python truth value"):
        if kb.gid.x < 3:
            pass
    # `==` and `!=` would compare the Python objects (a kernel with `if (true)` once came of it)
    with pytest.raises(BuildError, match=r"`!=` on IR values .* use a.ne\(b\)"):
        kb.gid.x % 4 != 3
    with pytest.raises(BuildError, match=r"`==` on IR values .* use a.eq\(b\)"):
        kb.gid.x == kb.gid.y
    assert show((kb.gid.x % 4).eq(3).node) == "((gid.x % 4u) == 3u)"
    # iteration would index the value forever (v[0], v[1], ... never raise IndexError)
    with pytest.raises(BuildError, match="not a Python sequence"):
        x, y, z = kb.gid
    with pytest.raises(BuildError, match="not a Python sequence"):
        list(kb.gid)
    with pytest.raises(BuildError, match="`in` on an IR value"):
        3 in kb.gid


def _base(**kw):
    def body(kb, out):
        out[kb.gid.x] = kb.gid.x.to(f32)

    k = kernel_with(body)
    return dataclasses.replace(k, **kw)


X = Member(Name("gid"), "x")
XY = Member(Name("gid"), "xy")
STORE = Assign(Index(Name("out"), X), Convert(f32, X))
IMG = Texture("img", StorageTexture("rgba8unorm"))
TEX = Texture("tex", SampledTexture(f32))


@pytest.mark.parametrize(
    "kernel, message",
    [
        (
            _base(body=(Let("a", Binary(Op.ADD, X, Convert(i32, X))), STORE)),
            "(gid.x + i32(gid.x)): + operands of different types: u32, i32",
        ),
        (
            _base(body=(Assign(Index(Name("out"), X), Convert(i32, X)),)),
            "out[gid.x] = i32(gid.x): cannot store i32 into out[gid.x] of type f32",
        ),
        (_base(body=(Let("a", Name("nope")), STORE)), "undefined name 'nope'"),
        (_base(body=(STORE, Let("y", X), Let("y", X))), "let y = gid.x: 'y' is already declared"),
        (_base(body=(If(X, (STORE,)),)), "If condition gid.x is u32, expected bool"),
        (_base(body=(Let("a", X), Assign(Name("a"), X), STORE)), "'a' is a let, not a var"),
        (_base(body=(STORE, Break())), "break outside a loop"),
        (_base(body=(STORE, Return(X))), "return of u32, expected nothing"),
        (
            _base(body=(Var("v", array(f32, 4)), Assign(Index(Name("v"), X), X), STORE)),
            "cannot store u32 into v[gid.x] of type f32",
        ),
        (
            _base(body=(Let("a", Member(Name("params"), "n")), STORE)),
            "undefined name 'params'",
        ),
        (
            _base(body=(Let("a", Call(Op.MIN, (X,))), STORE)),
            "min(gid.x): min takes 2 arguments, got 1",
        ),
        (_base(body=(Let("a", Lit(-1, u32)), STORE)), "literal -1 is not a valid u32 value"),
        (_base(body=(Let("a", FnCall("f", (X,))), STORE)), "undefined function 'f'"),
        (_base(body=()), "binding 'out' is declared but never used"),
        (
            _base(body=(Let("a", Index(Name("out"), X)),)),
            "binding 'out' is read_write but never written",
        ),
        (_base(workgroup_size=(512, 1, 1)), "has 512 invocations, at most 256"),
        (
            _base(builtins=(("gid", "global_invocation_id"), ("q", "sample_index"))),
            "unknown compute builtin 'sample_index'",
        ),
        (
            _base(body=(Let("a", Index(Name("out"), Lit(1.0, f32))), STORE)),
            "index must be i32 or u32, got f32",
        ),
        (
            _base(
                functions=(Function("f", (("a", u32),), u32, (Let("b", Name("a")),)),),
            ),
            "function f must end with a return",
        ),
        (
            _base(dispatch=Dispatch(Lit(1.0, f32), 4, 100)),
            "dispatch items 1.0f must be u32",
        ),
        (
            _base(textures=(IMG,), body=(Let("a", TextureLoad("img", XY, Lit(0, u32))), STORE)),
            "'img' is a texture_storage_2d<rgba8unorm, write>, which textureLoad does not read "
            "(a texture_2d or texture_3d)",
        ),
        (
            _base(textures=(TEX,), body=(TextureStore("tex", XY, Lit(1.5, f32)), STORE)),
            "'tex' is a texture_2d<f32>, which textureStore does not take (a storage texture of "
            "write or read_write access)",
        ),
        (
            _base(
                textures=(TEX,),
                body=(Let("a", TextureLoad("tex", Convert(vec(2, f32), XY), Lit(0, i32))), STORE),
            ),
            "the coordinates are vec2<f32>, expected vec2<i32> or vec2<u32>",
        ),
        (
            _base(textures=(IMG,), body=(TextureStore("img", Lit(2, u32), Lit(1.5, f32)), STORE)),
            "the coordinates are u32, expected vec2<i32> or vec2<u32>",
        ),
        (
            _base(textures=(TEX,), body=(Let("a", TextureLoad("tex", XY, Lit(0.5, f32))), STORE)),
            "textureLoad(tex, gid.xy, 0.5f): the level is f32, expected i32 or u32",
        ),
        (
            _base(workgroup_vars=(WorkgroupVar("w", RuntimeArray(f32)),)),
            "workgroup var 'w': type array<f32> is not a scalar, vector, matrix, struct, atomic "
            "or array",
        ),
        (
            _base(workgroup_vars=(WorkgroupVar("w", Array(f32, 0)),)),
            "workgroup var 'w': type array<f32, 0> is not an array of scalars, vectors or "
            "atomics, or of arrays of them",
        ),
        (
            _base(
                workgroup_vars=(
                    WorkgroupVar("a", array(vec(4, f32), 1024)),
                    WorkgroupVar("b", vec(4, f32)),
                )
            ),
            "workgroup var 'b': vec4<f32> brings workgroup memory to 16400 bytes, more than 16384",
        ),
    ],
)
def test_verify_rejects_ill_formed_kernels(kernel, message):
    with pytest.raises(VerifyError) as err:
        verify(kernel)
    assert message in str(err.value)


def test_store_to_read_only_binding():
    def body(kb, src, out):
        src[kb.gid.x] = 1.0
        out[kb.gid.x] = src[kb.gid.x]

    with pytest.raises(VerifyError, match="binding 'src' is read-only"):
        kernel_with(body, (("src", f32, "read"), ("out", f32, "read_write")))


def test_if_elif_else_chain():
    def body(kb, out):
        i = kb.gid.x
        with kb.if_(i < 2):
            out[i] = 1.0
        with kb.elif_(i < 4):
            out[i] = 2.0
        with kb.else_():
            out[i] = 3.0

    k = kernel_with(body)
    (stmt,) = k.body
    assert isinstance(stmt, If) and isinstance(stmt.orelse[0], If) and stmt.orelse[0].orelse


def test_types_spell_wgsl():
    assert str(vec(4, f16)) == "vec4<f16>" and str(array(f32, 8)) == "array<f32, 8>"
    assert isinstance(u32, Scalar) and isinstance(vec(2, i32), Vec)
    with pytest.raises(ValueError):
        vec(5, f32)


def test_vector_builtins_splat_literals(gpu):
    """``clamp(v4, 0.5, 1.0)`` builds WGSL's splat ``vec4<f32>(0.5f)``; both backends agree."""
    from kvdsl import interp, runtime
    from kvdsl.emit import emit
    from kvdsl.frontend import parse

    kb = KernelBuilder("splat", 4)
    out = kb.binding("out", vec(4, f32), "read_write")
    out[kb.gid.x] = clamp(out[kb.gid.x], 0.5, 1.0) * 2.0
    k = kb.build()
    assert "clamp(out[gid.x], vec4<f32>(0.5f), vec4<f32>(1.0f)) * 2.0f" in emit(k)
    assert parse(emit(k)).body == k.body
    x = np.random.default_rng(2).uniform(0.1, 1.4, 16).astype(np.float32)
    want = np.clip(x, 0.5, 1.0) * np.float32(2)
    for run in (interp.run, runtime.run):
        assert np.array_equal(run(k, {"out": x}, None, (1, 1, 1))["out"], want)


@pytest.mark.parametrize(
    "name, why",
    [
        ("1bad", "is not a WGSL identifier: give a letter or _, then letters, digits or _"),
        ("a-b", "is not a WGSL identifier"),
        ("", "is not a WGSL identifier"),
        ("_", "is not a WGSL identifier: _ alone is the phony assignment's"),
        ("__x", "starts with __, which WGSL reserves"),
        ("fn", "is a WGSL keyword"),
        ("loop", "is a WGSL keyword"),
        ("static", "is a word WGSL reserves"),
    ],
)
def test_names_that_are_not_wgsl_identifiers_are_refused(name, why):
    # A name WGSL cannot take would become WGSL no compiler takes (`let fn = 1.0f;`).
    def kernel(binding="b", let="x", param="count", const="C"):
        kb = KernelBuilder("k", 64)
        b = kb.binding(binding, f32, "read_write")
        c = kb.const(const, f32, 2.0)
        n = kb.param(param)
        b[n] = kb.let(let, c)
        return kb.build()

    kernel()  # the same kernel with good names builds
    for field, what in (("binding", "binding"), ("param", "params field"), ("const", "const")):
        with pytest.raises(
            VerifyError, match="^" + re.escape(f"{what} '{name}': name '{name}' {why}")
        ):
            kernel(**{field: name})
    with pytest.raises(VerifyError, match=re.escape(f"let {name} = C: name '{name}' {why}")):
        kernel(let=name)


@pytest.mark.parametrize("name", ["u32", "vec4f", "workgroupBarrier", "atomicAdd"])
def test_no_declaration_takes_a_type_or_builtin_name(name):
    # kvdsl reads u32(...) as the type and workgroupBarrier() as the barrier wherever they
    # appear: a let named u32 would make another kernel than its WGSL. A params field may (a
    # member), and a let an alias's name (the printer spells vec4<f32>, naming no alias). The
    # op table's builtins may be shadowed (tests/frontend/test_shadowed_builtins.py).
    why = "is a WGSL type's or a builtin's that kvdsl reads as such wherever it appears"

    def let_refused():
        kb = KernelBuilder("k", 64)
        b = kb.binding("b", f32, "read_write")
        b[0] = kb.let(name, 1.0)
        if name in SHADOWABLE:
            assert "let vec4f = 1.0f;" in emit(kb.build())
            return
        with pytest.raises(VerifyError, match=re.escape(f"name '{name}' {why}")):
            kb.build()

    kb = KernelBuilder("k", 64)
    b = kb.binding("b", f32, "read_write")
    with kb.function(name, [("x", f32)], f32) as (x,):
        kb.return_(x * 2.0)
    b[0] = kb.fn_call(name, 1.0)
    with pytest.raises(VerifyError, match=re.escape(f"function '{name}': name '{name}' {why}")):
        kb.build()
    let_refused()
    kb = KernelBuilder("k", 64)
    b = kb.binding("b", u32, "read_write")
    b[0] = kb.param(name)
    kb.build()
    # The params field's leave is not remembered for the next declaration (the verifier keeps
    # the names it found good, and took a let after a field of the same name).
    let_refused()


def test_helper_functions_take_free_names():
    for taken in ("main", "b", "C"):
        kb = KernelBuilder("k", 64)
        b = kb.binding("b", f32, "read_write")
        kb.const("C", f32, 2.0)
        with kb.function(taken, [("x", f32)], f32) as (x,):
            kb.return_(x * 2.0)
        b[0] = kb.fn_call(taken, 1.0)
        with pytest.raises(VerifyError, match=f"function {taken}: the name is taken"):
            kb.build()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda kb: kb.lid.x << 32, "(lid.x << 32u): a shift by 32: integers have 32 bits"),
        (
            lambda kb: kb.lid.x >> kb.const("S", u32, 40),
            "(lid.x >> S): a shift by 40: integers have 32 bits (give 0 to 31)",
        ),
        (lambda kb: kb.lid.x / 0, "(lid.x / 0u): an integer division by the constant 0"),
        (
            lambda kb: kb.lid.x % (kb.const("Z", u32, 4) - 4),
            "(lid.x % (Z - 4u)): an integer remainder by the constant 0",
        ),
        (
            lambda kb: convert(u32, kb.const("IM", i32, -(2**31)) / kb.const("M1", i32, -1)),
            "(IM / M1): i32's least value over -1 does not fit an i32",
        ),
        (
            lambda kb: kb.let("v", kb.lid)[3],
            "v[3u]: the constant index 3 is out of range (give 0 to 2)",
        ),
        (
            lambda kb: convert(u32, kb.const("A", i32, 523) << 30),
            "(A << 30u): 523 shifted left by 30 does not fit i32",
        ),
        # Vectors of constants, component by component (naga refuses the vector form too).
        (
            lambda kb: (kb.let("v", kb.lid.member("xy")) / construct(vec(2, u32), 1, 0))[0],
            "(v / vec2<u32>(1u, 0u)): an integer division by the constant 0",
        ),
        (
            lambda kb: (kb.let("v", kb.lid.member("xy")) % construct(vec(2, u32), 0))[1],
            "(v % vec2<u32>(0u)): an integer remainder by the constant 0",
        ),
        (
            lambda kb: (kb.let("v", kb.lid.member("xy")) << construct(vec(2, u32), 3, 33))[0],
            "(v << vec2<u32>(3u, 33u)): a shift by 33: integers have 32 bits",
        ),
        (
            lambda kb: convert(
                u32, (construct(vec(2, i32), 5, -(2**31)) / construct(vec(2, i32), -1))[0]
            ),
            "(vec2<i32>(5i, -2147483648i) / vec2<i32>(-1i)): i32's least value over -1",
        ),
        (
            lambda kb: (construct(vec(2, u32), 1, 3 << 30) << construct(vec(2, u32), 1))[0],
            "(vec2<u32>(1u, 3221225472u) << vec2<u32>(1u)): 3221225472 shifted left by 1",
        ),
        (
            lambda kb: construct(vec(2, u32), 0, 2**31).member("y") << 16,
            "(vec2<u32>(0u, 2147483648u).y << 16u): 2147483648 shifted left by 16",
        ),
        # Operators on vectors of constants, folded as WGSL folds them.
        (
            lambda kb: (~construct(vec(2, u32), 0, 0)).member("y") << 16,
            "((~vec2<u32>(0u, 0u)).y << 16u): 4294967295 shifted left by 16 does not fit u32",
        ),
        (
            lambda kb: (
                kb.let("v", kb.lid.member("xy"))
                / (construct(vec(2, u32), 3, 1) - construct(vec(2, u32), 1, 1))
            )[0],
            "(v / (vec2<u32>(3u, 1u) - vec2<u32>(1u, 1u))): an integer division by the constant 0",
        ),
    ],
)
def test_constants_wgsl_rejects_are_refused(make, message):
    # naga and Tint reject these when they compile the WGSL (shift by 32 or more, a constant
    # zero divisor, an index past a vector's end).
    kb = KernelBuilder("k", 1)
    b = kb.binding("b", u32, "read_write")
    b[0] = make(kb)
    with pytest.raises(VerifyError, match="^" + re.escape(message)):
        kb.build()


def test_clamp_with_constant_bounds_out_of_order_is_refused():
    # A swapped QMIN and QMAX: naga and Tint refuse the WGSL.
    for width in (1, 4):
        kb = KernelBuilder("k", 1)
        ty = f32 if width == 1 else vec(4, f32)
        b = kb.binding("b", ty, "read_write")
        lo, hi = kb.const("QMIN", f32, -128.0), kb.const("QMAX", f32, 127.0)
        if width == 4:
            lo, hi = (construct(ty, x, x, x, x) for x in (lo, hi))
        b[0] = clamp(b[1], hi, lo)
        with pytest.raises(VerifyError, match="the constant low bound .*QMAX.* is above the high"):
            kb.build()
    kb = KernelBuilder("k", 1)
    b = kb.binding("b", u32, "read_write")
    b[0] = clamp(b[1], kb.const("LO", u32, 3), kb.lid.x)  # one bound at run time: WGSL's
    kb.build()


def test_a_negative_constant_index_is_refused():
    kb = KernelBuilder("k", 1)
    b = kb.binding("b", u32, "read_write")
    b[kb.const("N", i32, -1)] = 1
    with pytest.raises(VerifyError, match=re.escape("b[N]: the constant index -1 is out of range")):
        kb.build()


def test_runtime_and_in_range_operands_still_build():
    kb = KernelBuilder("k", 1)
    b = kb.binding("b", u32, "read_write")
    v = kb.let("v", kb.lid)
    b[0] = (kb.lid.x << 31) + (kb.lid.x >> kb.lid.y) + kb.lid.x / kb.lid.y + v[2]
    b[kb.const("LAST", u32, 3)] = kb.lid.x % kb.const("W", u32, 32)
    # A step out of its type's range is WGSL's to judge (implementations differ): no value.
    k = kb.let("k", kb.const("K", u32, 0) - 1)
    b[kb.lid.x] = k + convert(u32, kb.const("L", i32, -1) << 31)
    kb.build()


def test_a_compound_shift_by_a_constant_32_or_more_is_refused():
    kb = KernelBuilder("k", 1)
    b = kb.binding("b", u32, "read_write")
    v = kb.var("v", u32, 1)
    kb.emit(Assign(v.node, Lit(40, u32), Op.SHL))  # v <<= 40u
    b[0] = v
    with pytest.raises(VerifyError, match=re.escape("(v << 40u): a shift by 40: integers have")):
        kb.build()


def test_a_compound_vector_division_by_a_constant_zero_component_is_refused():
    # `w2 /= vec2<i32>(0i, -1i)`, a shape the integer fuzz draws: naga takes it and the H200
    # runs it other than WGSL says; Tint refuses it, as it refuses `w2 / ...`.
    from kvdsl.frontend import parse
    from kvdsl.frontend.errors import WgslTypeError
    from kvdsl.runtime import tint_check

    def source(stmt: str) -> str:
        return (
            "@group(0) @binding(0) var<storage, read_write> b: array<i32>;\n"
            "@compute @workgroup_size(64)\n"
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
            f"  var w = vec2<i32>(b[gid.x], 7i);\n  {stmt}\n  b[gid.x] = w.x + w.y;\n}}\n"
        )

    refused = {
        "w /= vec2<i32>(0i, -1i);": "(w / vec2<i32>(0i, -1i)): an integer division by the constant 0",
        "w %= vec2<i32>(3i, 0i);": "(w % vec2<i32>(3i, 0i)): an integer remainder by the constant 0",
        "w /= vec2<i32>(0i);": "(w / vec2<i32>(0i)): an integer division by the constant 0",
        "w <<= vec2<u32>(1u, 32u);": "(w << vec2<u32>(1u, 32u)): a shift by 32: integers have",
    }
    taken = ["w /= vec2<i32>(2i, -1i);", "w %= vec2<i32>(3i);", "w >>= vec2<u32>(1u, 31u);"]
    for stmt, message in refused.items():
        with pytest.raises(WgslTypeError, match=re.escape(message)):
            parse(source(stmt))
    for stmt in taken:
        parse(source(stmt))
    tint = tint_check({stmt: source(stmt) for stmt in [*refused, *taken]})
    assert {stmt for stmt, err in tint.items() if err is not None} == set(refused)


def test_float_constants_wgsl_refuses_are_refused():
    # naga and Tint refuse a float constant that is not finite, or a builtin's constant
    # argument outside its domain.
    from kvdsl.ir.builder import as_val, call

    cases = [
        (lambda kb: kb.const("Z", f32, 0.0) / kb.const("Z2", f32, 0.0), "the constant is nan"),
        (lambda kb: as_val(1.0, f32) / kb.const("EPS", f32, 0.0), "the constant is inf"),
        # -0.0 is its own value (a cache once gave 0.0's for it, or 0.0 -0.0's).
        (lambda kb: as_val(1.0, f32) / kb.const("NZ", f32, -0.0), "the constant is -inf"),
        (lambda kb: call(Op.EXP, kb.const("C", f32, 100.0)), "exp(C): the constant is inf"),
        (lambda kb: call(Op.SQRT, kb.const("M", f32, -1.0)), "outside sqrt's domain (give 0 or"),
        (lambda kb: call(Op.LOG, kb.const("L", f32, 0.0)), "outside log's domain (give more"),
    ]
    for make, message in cases:
        kb = KernelBuilder("k", 1)
        b = kb.binding("b", f32, "read_write")
        b[0] = make(kb)
        with pytest.raises(VerifyError, match=re.escape(message)):
            kb.build()
    for big in (70000.0, 65519.0):  # past f16's 65,504 (the second rounds to it: Tint refuses)
        kb = KernelBuilder("k", 1)
        b = kb.binding("b", f16, "read_write")
        b[0] = convert(f16, kb.const("BIG", f32, big))
        with pytest.raises(VerifyError, match=re.escape(f"f16(BIG): the constant {big} is past")):
            kb.build()
    # Finite constants, and anything at run time, build.
    kb = KernelBuilder("k", 1)
    b = kb.binding("b", f32, "read_write")
    b[0] = kb.const("A", f32, 2.0) * 3.0 + call(Op.INVERSE_SQRT, kb.const("E", f32, 1e-6))
    b[1] = as_val(1.0, f32) / convert(f32, kb.lid.x)
    kb.build()


def test_the_words_refused_as_names_are_the_ones_naga_refuses(gpu):
    # The keyword and reserved-word lists are the WGSL spec's; each must be one naga refuses as
    # a name too, or the verifier would turn away a kernel a compiler takes (binding_array,
    # reserved once, is a type generator now and was dropped).
    from kvdsl.ir.scope import KEYWORDS, RESERVED
    from kvdsl.runtime import compile_wgsl
    from kvdsl.runtime.errors import CompileError

    head = "@group(0) @binding(0) var<storage, read_write> b: array<f32>;\n@compute @workgroup_size(1)\n"
    for word in sorted(KEYWORDS | RESERVED):
        with pytest.raises(CompileError):
            compile_wgsl(head + f"fn main() {{\n  let {word} = 1.0f;\n  b[0] = {word};\n}}\n")
    compile_wgsl(
        head + "fn main() {\n  let binding_array_x = 1.0f;\n  b[0] = binding_array_x;\n}\n"
    )


def test_a_loop_that_never_exits_is_refused():
    # WGSL's behaviour analysis: a loop with no reachable break or return never exits, and Tint
    # refuses it (naga takes it).
    def kernel(*body):
        kb = KernelBuilder("k", 1)
        b = kb.binding("b", u32, "read_write")
        v = kb.var("v", u32, 1)
        for s in body:
            kb.emit(s)
        b[0] = v
        return kb.build()

    inc = Assign(Name("v"), Lit(1, u32), Op.ADD)
    with pytest.raises(VerifyError, match="for \\(; ; \\) \\{ ... \\}: the loop never exits"):
        kernel(For(None, None, None, (inc,)))
    with pytest.raises(VerifyError, match="loop \\{ ... \\}: the loop never exits"):
        kernel(Loop((inc, Continue(), Break())))  # the break comes after a continue: never reached
    kernel(Loop((inc, If(Lit(True, bool_), (Break(),)))))
    kernel(For(None, Lit(True, bool_), None, (inc,)))  # a condition is a way out
    kernel(Loop((inc, Return())))


def test_portability_names_what_an_implementation_runs_wrong():
    # kvdsl.ir.portability: a signed % (an operator or a compound assignment, scalar or vector),
    # an i32 abs and an i32 max/min/clamp of one; not a u32 %, nor a float abs.
    from kvdsl.ir.builder import call
    from kvdsl.ir.portability import ABS_NOT_NEGATIVE, MAX_OF_ABS, SIGNED_REMAINDER, hazards

    kb = KernelBuilder("k", 64)
    b = kb.binding("b", i32, "read_write")
    u = kb.binding("u", u32, "read_write")
    f = kb.binding("f", f32, "read_write")
    a = kb.let("a", convert(i32, kb.lid.x) - 3)
    b[0] = a % 2
    v = kb.var("v", i32, a)
    v.set(3, Op.MOD)
    b[1] = v
    w = kb.let("w", construct(vec(2, i32), a, a) % construct(vec(2, i32), 2, 3))
    b[2] = w[0]
    b[3] = clamp(a, call(Op.ABS, b[4]), 9)
    u[0] = kb.lid.x % 3
    f[0] = call(Op.MAX, f[1], call(Op.ABS, f[2]))
    k = kb.build()
    got = [(show(s), why) for s, why in hazards(k)]
    assert got == [
        ("b[0u] = (a % 2i)", SIGNED_REMAINDER),
        ("v %= 3i", SIGNED_REMAINDER),
        ("let w = (vec2<i32>(a, a) % vec2<i32>(2i, 3i))", SIGNED_REMAINDER),
        ("b[3u] = clamp(a, abs(b[4u]), 9i)", ABS_NOT_NEGATIVE),
        ("b[3u] = clamp(a, abs(b[4u]), 9i)", MAX_OF_ABS),
    ]


def test_portability_names_an_unpack_of_a_fixed_word():
    # unpack2x16float of a literal, a const, a let of them or an expression over those (fixed
    # when the shader compiles) is noted; of a load, a var or a let of a load it is not.
    from kvdsl.ir.builder import call, lit
    from kvdsl.ir.portability import CONSTANT_UNPACK, hazards

    kb = KernelBuilder("k", 64)
    src = kb.binding("src", u32, "read")
    out = kb.binding("out", f32, "read_write")
    word = kb.const("WORD", u32, 0x38003400)
    fixed = kb.let("fixed", word | 0x10000)
    loaded = kb.let("loaded", src[0])
    v = kb.var("v", u32, 0x3C003C00)
    out[0] = call(Op.UNPACK2X16FLOAT, lit(0x38003400, u32))[1]
    out[1] = call(Op.UNPACK2X16FLOAT, word)[1]
    out[2] = call(Op.UNPACK2X16FLOAT, fixed << 1)[1]
    out[3] = call(Op.UNPACK2X16FLOAT, call(Op.PACK2X16FLOAT, construct(vec(2, f32), 0.0, 0.5)))[1]
    out[4] = call(Op.UNPACK2X16FLOAT, loaded)[1]
    out[5] = call(Op.UNPACK2X16FLOAT, v)[1]
    out[6] = call(Op.UNPACK2X16FLOAT, word + src[1])[1]
    pair = construct(vec(4, f32), 0.0, 0.5, convert(f32, loaded), 1.0)
    out[7] = call(Op.UNPACK2X16FLOAT, call(Op.PACK2X16FLOAT, pair.member("xy")))[1]
    out[8] = call(Op.UNPACK2X16FLOAT, call(Op.PACK2X16FLOAT, pair.member("yz")))[1]
    got = [show(s) for s, why in hazards(kb.build()) if why == CONSTANT_UNPACK]
    assert got == [
        "out[0u] = unpack2x16float(939537408u)[1u]",
        "out[1u] = unpack2x16float(WORD)[1u]",
        "out[2u] = unpack2x16float((fixed << 1u))[1u]",
        "out[3u] = unpack2x16float(pack2x16float(vec2<f32>(0.0f, 0.5f)))[1u]",
        "out[7u] = unpack2x16float(pack2x16float(vec4<f32>(0.0f, 0.5f, f32(loaded), 1.0f).xy))[1u]",
    ]


def test_portability_names_a_bool_select_over_its_own_condition():
    # select(a && c, b || c, c) (or with & and |), which NVIDIA's driver ran as select(a, b, c);
    # not with the condition first, nor with it in one arm only.
    from kvdsl.ir.builder import binary, lit
    from kvdsl.ir.tree import Call, walk
    from kvdsl.ir.portability import SELECT_OF_ITS_CONDITION, hazards, select_of_its_condition

    kb = KernelBuilder("k", 64)
    out = kb.binding("out", u32, "read_write")
    c = kb.let("c", kb.lid.x < 3)
    a, b = kb.let("a", kb.lid.x > 7), kb.let("b", kb.lid.x.eq(5))
    forms = [
        select(binary(Op.LAND, a, c), binary(Op.LOR, b, c), c),
        select(binary(Op.AND, a, c), binary(Op.OR, b, c), c),
        select(binary(Op.LAND, c, a), binary(Op.LOR, c, b), c),
        select(binary(Op.LAND, a, c), b, c),
    ]
    for j, f in enumerate(forms):
        out[j] = select(lit(0, u32), lit(1, u32), f)
    k = kb.build()
    assert not any(
        select_of_its_condition(n) for n in walk(k) if type(n) is Call and n.op != Op.SELECT
    )
    got = [show(s) for s, why in hazards(k) if why == SELECT_OF_ITS_CONDITION]
    assert got == [
        "out[0u] = select(0u, 1u, select((a && c), (b || c), c))",
        "out[1u] = select(0u, 1u, select((a & c), (b | c), c))",
    ]
