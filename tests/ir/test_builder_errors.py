"""Builder misuse is refused with a message that names the argument and says what was expected
(``kvdsl/ir/values.py``)."""

import numpy as np
import pytest

from kvdsl.ir import (
    KernelBuilder,
    Op,
    array,
    as_val,
    call,
    construct,
    convert,
    f32,
    i32,
    lit,
    min_,
    select,
    u32,
    vec,
)
from kvdsl.ir.builder import BuildError


@pytest.fixture
def q():
    """A u32 params field."""
    return KernelBuilder("k").param("q")


def refused(build) -> str:
    with pytest.raises(BuildError) as err:
        build()
    return str(err.value)


def test_call_with_an_op_name_as_text_names_the_op_to_give(q):
    assert refused(lambda: call("abs", q)) == (
        "call: op must be an Op (e.g. Op.ABS), not the text 'abs'"
    )
    assert refused(lambda: call("inverseSqrt", q.to(f32))) == (
        "call: op must be an Op (e.g. Op.INVERSE_SQRT), not the text 'inverseSqrt'"
    )
    assert refused(lambda: call("frobnicate", q)) == (
        "call: op must be an Op (e.g. Op.ABS), not the text 'frobnicate'"
    )


def test_call_of_an_operator_or_with_the_wrong_count_of_arguments(q):
    assert refused(lambda: call(Op.ADD, q, q)) == (
        "call: Op.ADD is the operator +, not a builtin function: apply it to values (a + b, -a) "
        "or give a builtin (e.g. Op.ABS)"
    )
    assert refused(lambda: call(Op.ABS, q, q)) == "call: abs takes 1 argument, got 2"
    assert refused(lambda: call(Op.CLAMP, q)) == "call: clamp takes 3 arguments, got 1"


def test_convert_with_its_arguments_swapped_says_the_type_comes_first(q):
    assert refused(lambda: convert(q, i32)) == (
        "convert: the first argument is the target type (e.g. convert(i32, x)); got the value "
        "params.q (u32) first"
    )
    assert refused(lambda: convert(3, i32)) == (
        "convert: the first argument is the target type (e.g. convert(i32, x)); got the number "
        "3 first"
    )


def test_convert_to_a_type_that_is_no_scalar_or_vector(q):
    assert refused(lambda: convert(array(f32, 4), q)) == (
        "convert: the target type must be a scalar or vector type, not the type array<f32, 4>"
    )


def test_a_python_value_where_an_ir_value_is_needed(q):
    assert refused(lambda: convert(i32, "q")) == (
        "convert: the value to convert must be an IR value or a number, not the text 'q'"
    )
    assert refused(lambda: q + "x") == (
        "+: the right operand must be an IR value or a number, not the text 'x'"
    )
    assert refused(lambda: "x" * q) == (
        "*: the left operand must be an IR value or a number, not the text 'x'"
    )
    assert (
        refused(lambda: q + [1]) == "+: the right operand must be an IR value or a number, not [1]"
    )
    assert refused(lambda: min_(q, None)) == (
        "min: argument 2 must be an IR value or a number, not None"
    )
    assert refused(lambda: select(q, q, "c")) == (
        "select: argument 3 must be an IR value or a number, not the text 'c'"
    )
    assert refused(lambda: as_val(i32)) == ("expected an IR value or a number, not the type i32")


def test_lit_and_construct_say_which_argument_is_the_type(q):
    assert refused(lambda: lit(u32, 3)) == (
        "lit: the value comes first, then its scalar type (e.g. lit(3, u32)); got the type u32 "
        "first"
    )
    assert refused(lambda: lit(3, vec(2, u32))) == (
        "lit: the second argument is the literal's scalar type (e.g. lit(3, u32)), not the type "
        "vec2<u32>"
    )
    assert refused(lambda: construct(f32, 1.0)) == (
        "construct: the first argument is a vector or array type (e.g. construct(vec(2, f32), x, "
        "y)); got the type f32"
    )
    assert refused(lambda: construct(vec(2, u32), q, "y")) == (
        "construct: component 2 must be an IR value or a number, not the text 'y'"
    )


def test_messages_name_no_python_type(q):
    for build in (
        lambda: call("abs", q),
        lambda: convert(q, i32),
        lambda: q + "x",
        lambda: as_val(i32),
        lambda: construct(f32, 1.0),
    ):
        message = refused(build)
        for word in ("'str'", "Scalar(", "NoneType", "object", "attribute", "Val("):
            assert word not in message, message


# ---- the host-side contract given to build ----------------------------------------------------


def _copy_builder():
    from kvdsl.ir import KernelBuilder, f32, u32

    kb = KernelBuilder("copy_rows", workgroup_size=64)
    src = kb.binding("src", f32, "read")
    dst = kb.binding("dst", f32, "read_write")
    width = kb.const("WIDTH", u32, 4)
    rows = kb.param("count")
    dst[kb.gid.x] = src[kb.gid.x]
    return kb, rows, width


def test_build_takes_extents_and_requirements():
    from kvdsl.ir import largest
    from kvdsl.runtime.contract import needs

    kb, rows, width = _copy_builder()
    kernel = kb.build(
        extents={"src": rows * width, "dst": largest("src") + 1},
        requires={"count >= 1": rows >= 1},
    )
    assert [n for n, _ in kernel.extents] == ["src", "dst"]
    assert needs(kernel, {"count": 5}, {"src": np.array([3.0, 9.0], np.float32)}) == {
        "src": 20,
        "dst": 10,
    }
    assert [text for text, _ in kernel.requires] == ["count >= 1"]


@pytest.mark.parametrize(
    "extents, message",
    [
        ({"src": 4}, "kernel copy_rows: extents: no extent for binding 'dst' (every binding needs"),
        ({"src": 4, "dst": 4, "out": 4}, "kernel copy_rows: extents: 'out' is no binding; the "
         "bindings are src, dst"),
        ({"src": "gid", "dst": 4}, "extent of 'src': gid.x is not a host-side expression"),
        ({"src": 2.5, "dst": 4}, "extent of 'src': the number 2.5 is neither a whole number nor an expression"),
    ],
)  # fmt: skip
def test_a_contract_outside_the_hosts_reach_is_a_build_error(extents, message):
    kb, rows, width = _copy_builder()
    extents = {k: kb.gid.x if v == "gid" else v for k, v in extents.items()}
    with pytest.raises(BuildError) as err:
        kb.build(extents=extents)
    assert str(err.value).startswith(message), str(err.value)
