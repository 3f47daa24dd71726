"""The typed IR: types, the op table, expression and statement trees, the builder, the verifier
and the features a kernel's module needs.

The IR is small, typed and frozen. :mod:`~kvdsl.ir.types` is a closed set of frozen values
whose ``str`` is the WGSL spelling (``u32``, ``vec(4, f16)``, ``array(f32, 128)``, runtime
arrays, the params struct, pointers ``Ptr``, and the result structs of ``frexp`` and ``modf``),
and WGSL's memory layout of structs (``field_offsets``, ``size_of``, ``stride``) for arrays of
structs in storage and workgroup memory.

:mod:`~kvdsl.ir.ops` is the op table: one row per operator and builtin with its spelling, its
level in WGSL's expression grammar, its typing rule, what each argument's abstract literal is
typed from, and its numpy implementation with WGSL's exact semantics; :mod:`~kvdsl.ir.library`
holds the implementations of WGSL's numeric, bit and packing builtins past the arithmetic core.
The emitter, the interpreter, the verifier and the parser all read that table, so each piece of
WGSL semantics is stated once. A row says which operand levels it accepts rather than one
precedence number, because WGSL's grammar is not a ladder: shifts take only unary operands and
relations do not chain.

:mod:`~kvdsl.ir.tree` holds expressions, statements, module items and the ``Kernel`` with its
host contract (the builtin tables from :mod:`~kvdsl.ir.builtins`, the nodes' fast ``__init__``
from :mod:`~kvdsl.ir.slots`), all frozen dataclasses with tuple children, so equality and hashing come for
free. (The name keeps it apart from :mod:`kvdsl.nodes`, the composable building blocks.) Code
that matches on them imports the module once, ``from kvdsl.ir import tree as ir``, and writes
``case ir.Binary(op, a, b):``. Expressions carry no types: only literals and conversions do,
and ``verify`` derives the rest from the declarations in scope. This keeps the IR equal to what
the WGSL text says, so ``parse(emit(k)) == k`` holds without the parser rebuilding a cached
type on every node.

:mod:`~kvdsl.ir.values` holds the builder's typed handles (``Val``) and expression functions
(``call``, ``convert``, ``lit``); :mod:`~kvdsl.ir.builder` is ``KernelBuilder``, the
statements, bindings and scopes. Python operators build typed expressions, literals adapt like
WGSL's abstract numerics, Python constructs that would silently test the Python objects (``if
v:``, ``==``, iteration) raise, and misuse (an op given as text, ``convert``'s arguments
swapped) says what was expected. The handles carry types while building, so type errors still
come at build time.

The verifier is split by concern: :mod:`~kvdsl.ir.declarations` (the module's declarations,
checked into the module scope), :mod:`~kvdsl.ir.scope` (names: every declared name one WGSL
takes), :mod:`~kvdsl.ir.typeof` (typing of expressions) with :mod:`~kvdsl.ir.pointers`
(pointers, atomics, helper calls and their alias analysis), :mod:`~kvdsl.ir.consteval` (the
constants WGSL refuses when it compiles, evaluated as Tint does, through the op table's own
implementations) with :mod:`~kvdsl.ir.conststeps` (one step of that arithmetic),
:mod:`~kvdsl.ir.memtypes` (the types storage and workgroup memory hold),
:mod:`~kvdsl.ir.behavior` (how control leaves a statement, and the loops WGSL refuses by it),
and :mod:`~kvdsl.ir.verify` (statements, the ``Verifier`` that ties them together;
``house_notes``, kvdsl's own rules for its catalog, which parsed WGSL gets as notes).
:mod:`~kvdsl.ir.features` decides from the IR which WebGPU features a module needs
(``shader-f16``, ``subgroups``): the emitter's ``enable`` lines, ``index.json`` and the runtime
all read it; and the WebGPU limits it needs past the defaults (``limits``: storage bindings,
workgroup memory and size), which ``index.json`` states and the runtime requests.
:mod:`~kvdsl.ir.uniformity` is WGSL's uniformity analysis, run where a kernel holds a barrier or
a subgroup builtin, over the graph of :mod:`~kvdsl.ir.depgraph`; a refusal names the chain of
values it depends on.
:mod:`~kvdsl.ir.portability` finds the constructs a WebGPU implementation runs other than WGSL
says (docs/deviations.md); ``kvdsl check`` prints them as notes.

Atomics are ``ir.AtomicCall`` (an expression: ``atomicAdd(&a[i], v)``) and ``ir.AtomicStmt``
(its value discarded), on elements of ``types.Atomic`` arrays or through a pointer
(``Deref(p)`` as the target); the subgroup builtins are op-table rows marked ``subgroup``, which
the interpreter evaluates across its invocation grid. ``ir.Barrier(space)`` is
``workgroupBarrier()`` or ``storageBarrier()``; ``ir.UniformLoad(p)`` is
``workgroupUniformLoad(p)``. A struct value at function scope is ``Construct(S, args)`` (the
interpreter holds it as its members by name)."""

from kvdsl.ir.builder import Buffer, KernelBuilder, Local, Shared, largest, with_contract
from kvdsl.ir.dispatch import DispatchError, workgroups
from kvdsl.ir.features import features
from kvdsl.ir.kernel import *  # noqa: F403 (Kernel, Binding, ...: kernel.__all__)
from kvdsl.ir.tree import Barrier
from kvdsl.ir.ops import Op
from kvdsl.ir.types import (
    Array,
    Mat,
    RuntimeArray,
    Scalar,
    Struct,
    Vec,
    array,
    bool_,
    f16,
    f32,
    i32,
    mat,
    u32,
    vec,
)
from kvdsl.ir.values import (
    BuildError,
    Val,
    as_val,
    call,
    clamp,
    construct,
    bitcast,
    convert,
    cos,
    dot,
    inverse_sqrt,
    lit,
    max_,
    min_,
    pack2x16float,
    round_,
    select,
    shuffle_xor,
    sin,
    unpack2x16float,
)
from kvdsl.ir.verify import Verifier, VerifyError, verify

__all__ = [
    "Array",
    "Barrier",
    "Binding",
    "Buffer",
    "BuildError",
    "Const",
    "Dispatch",
    "DispatchError",
    "Function",
    "Kernel",
    "KernelBuilder",
    "Local",
    "Mat",
    "Shared",
    "Op",
    "PrivateVar",
    "RuntimeArray",
    "Scalar",
    "Struct",
    "Texture",
    "Uniform",
    "Val",
    "Vec",
    "Verifier",
    "VerifyError",
    "WorkgroupVar",
    "with_contract",
    "array",
    "as_val",
    "bool_",
    "call",
    "clamp",
    "construct",
    "bitcast",
    "convert",
    "cos",
    "dot",
    "features",
    "f16",
    "f32",
    "i32",
    "inverse_sqrt",
    "largest",
    "lit",
    "mat",
    "max_",
    "min_",
    "pack2x16float",
    "round_",
    "select",
    "shuffle_xor",
    "sin",
    "u32",
    "unpack2x16float",
    "vec",
    "verify",
    "workgroups",
]
