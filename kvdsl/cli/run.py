"""``kvdsl run``: a variant or a WGSL file on the GPU, in the interpreter, or both compared."""

from __future__ import annotations

import argparse
import math

import numpy as np

from kvdsl import catalog
from kvdsl.cli.check import portability_notes
from kvdsl.cli.loops import check_loop_cap, fresh_copies
from kvdsl.cli.options import add_max_steps, command
from kvdsl.cli.dispatch_line import file_dispatch, rule_workgroups
from kvdsl.cli.inputs import (
    UsageError,
    check_paged,
    load_inputs,
    load_json,
    parse_constants,
    parse_workgroups,
    wgsl_file,
)
from kvdsl.ir import Kernel
from kvdsl.kernels.config import KernelConfig
from kvdsl.ir.portability import LLVMPIPE_LOOP_TRIPS


def cmd_run(args: argparse.Namespace) -> int:
    """Run a variant or a WGSL file on inputs from an .npz.

    Run a catalog variant or a WGSL file on inputs from an .npz archive, on the GPU, in the
    interpreter, or on both, comparing every read_write buffer.
    """
    from kvdsl.contract import ContractError, check_requirements
    from kvdsl.runtime.contract import check_contract
    from kvdsl.runtime.inputs import check_inputs, shown
    from kvdsl.runtime.layout import pack_uniform, split_textures, split_uniforms

    lines, cfg, rule = None, None, None
    constants = parse_constants(args.constants)
    if args.variant.endswith(".wgsl"):
        kernel, lines = wgsl_file(args.variant, constants=constants)
        if args.workgroups is None:
            rule = file_dispatch(args.variant)
    else:
        if constants:
            raise UsageError("--constants: a catalog variant has no overrides (a WGSL file may)")
        cfg = catalog.config(args.variant)
        kernel = catalog.build(args.variant)
    buffers = load_inputs(args.inputs)
    params = load_json(args.params, "--params") if args.params else {}
    if not isinstance(params, dict):
        raise UsageError(f"--params: expected a JSON object of params fields, got {shown(params)}")
    workgroups = parse_workgroups(args.workgroups)
    if args.tol is not None and (args.backend != "both" or not 0 <= args.tol < float("inf")):
        raise UsageError(
            f"--tol={args.tol!r}: a relative tolerance of 0 or more, with --backend both only"
        )
    size = _subgroup_size(args, kernel)
    # One check of what the host passes, for every backend, before any runs: the params and
    # buffers by type and byte order, a paged variant's ids, a variant's requirements as
    # index.json states them (in the words of kvdsl.js and the session host), then the
    # kernel's contract.
    # A WGSL file's uniforms other than params are given by name beside the params fields
    # (a field as params.NAME where a uniform shares its name).
    fields, others = split_uniforms(kernel.uniforms, params, kernel.params)
    for u in kernel.uniforms:
        pack_uniform(u, others, kernel.name)  # its value checked as the params are
    buffers, texels = split_textures(kernel.textures, buffers)  # [height, width, channels]
    buffers = check_inputs(
        kernel.bindings, kernel.params, buffers, fields, kernel.name, contract=kernel
    )
    if cfg is not None:
        check_paged(cfg, kernel, buffers, params)
        try:
            check_requirements(kernel, params, buffers, args.variant)
        except ContractError as err:
            raise UsageError(str(err)) from None
    check_contract(kernel, buffers, fields)
    buffers = buffers | texels
    if rule is not None:  # the file's dispatch line, for these params
        workgroups = rule_workgroups(args.variant, rule, fields)
    outputs: dict[str, np.ndarray] = {}
    counted: dict | None = None  # the interpreter's loop trips (kvdsl.cli.loops)
    if args.backend in ("interp", "both"):
        from kvdsl.interp import TooManyInvocations, run as interp_run

        copies = {k: v.copy() for k, v in buffers.items()}  # the GPU starts from the inputs too
        try:
            outputs = interp_run(
                kernel,
                copies,
                params,
                workgroups,
                source_lines=lines,
                subgroup_size=size,
                max_steps=args.max_steps,
                loop_trips=(counted := {"mark": LLVMPIPE_LOOP_TRIPS}),
            )
        except TooManyInvocations as err:
            raise UsageError(f"--workgroups: {err}") from None
    if args.backend in ("gpu", "both"):
        from kvdsl.ir.portability import naga_aborts
        from kvdsl.runtime import current_webgpu, run

        why = naga_aborts(kernel)
        if why is not None and current_webgpu().implementation == "wgpu-native":
            raise UsageError(
                f"{args.variant}: not run on the GPU: {why} (--backend interp runs it)"
            )

        want, outputs = outputs, run(kernel, dict(buffers), params, workgroups)

        def interpret(loop_trips: dict) -> None:
            from kvdsl.interp import run as interp_run

            interp_run(
                kernel,
                fresh_copies(buffers),
                params,
                workgroups,
                source_lines=lines,
                subgroup_size=size,
                max_steps=args.max_steps,
                loop_trips=loop_trips,
            )

        check_loop_cap(args.variant, kernel, counted, interpret, lines)
    differ = False
    if args.backend == "both":
        needed: list[float] = []  # each differing buffer's least --tol (inf: not floats)
        allowed = {}  # a variant's outputs as kvdsl verify judges them: name -> what it allows
        if cfg is not None and args.tol is None:
            allowed = verify_allowance(cfg, params, outputs, want)
        for name, got in outputs.items():
            same, line = _agreement(name, got, want[name], args.tol or 0.0, allowed.get(name))
            differ |= not same
            print(line)
            if not same:
                needed.append(least_tol(got, want[name]))
        notes = portability_notes(args.variant, kernel, lines) if differ and lines else []
        for note in notes:  # what an implementation was found to run wrong
            print(note)
        hint = None if notes else tol_hint(needed)  # a noted fault is no rounding to allow
        if hint:
            print(hint)
        outputs = outputs | {f"interp.{k}": v for k, v in want.items()}
    if args.out:
        # np.savez adds .npz to a name without it: the file written is named as it is
        path = args.out if args.out.endswith(".npz") else args.out + ".npz"
        try:
            np.savez(path, **outputs)
        except OSError as err:
            raise UsageError(f"--out: cannot write {path!r} ({err.strerror})") from None
        print(f"wrote {', '.join(outputs)} to {path}")
    elif args.backend != "both":
        for name, arr in outputs.items():
            print(f"{name}: {arr.dtype}{list(arr.shape)} {np.array2string(arr.ravel()[:8])}")
    return 1 if differ else 0


def _subgroup_size(args: argparse.Namespace, kernel: Kernel) -> int:
    """The subgroup size to interpret ``kernel`` at: ``--subgroup-size``, else (with
    ``--backend both``, for a kernel that uses subgroups) the adapter's, else 32."""
    from kvdsl.interp import SUBGROUP_SIZES
    from kvdsl.ir.features import uses_subgroups

    if args.subgroup_size is not None:
        if args.backend == "gpu":
            raise UsageError(
                f"--subgroup-size={args.subgroup_size}: the interpreter's, with --backend "
                "interp or both only (the GPU's is its own)"
            )
        if args.subgroup_size not in SUBGROUP_SIZES:
            raise UsageError(
                f"--subgroup-size={args.subgroup_size}: expected a power of two in 4..128"
            )
        return args.subgroup_size
    if args.backend == "both" and uses_subgroups(kernel):
        from kvdsl.runtime import subgroup_size

        return subgroup_size() or 32  # none: the GPU run says the feature is missing
    return 32


def verify_allowance(
    cfg: KernelConfig, params: dict, got: dict[str, np.ndarray], want: dict[str, np.ndarray]
) -> dict[str, str]:
    """The outputs of variant ``cfg`` that ``kvdsl verify`` would accept from a GPU against the
    interpreter (:func:`kvdsl.harness.run_judge`: quantised codes within one step in a few
    elements, floats within the mode's tolerance), each with the words of what it allows."""
    from kvdsl.harness import run_judge

    judge = run_judge(cfg, params, want)
    out = {}
    for name, _, problem in judge.judge(got, want, codes=judge.codes):
        if problem:
            continue
        if name in judge.codes:
            out[name] = "quantised codes within one step, as kvdsl verify allows a GPU's division"
        else:
            tol = judge.tolerance.get(name, 0.0)
            out[name] = f"within kvdsl verify's {tol:g} relative to 1 + |interpreter's|"
    return out


def _agreement(
    name: str, got: np.ndarray, want: np.ndarray, tol: float, allowed: str | None = None
) -> tuple[bool, str]:
    """Whether the GPU's ``got`` equals the interpreter's ``want`` (integers bit for bit; floats
    bit for bit or both NaN, or within ``tol`` of ``want`` relative to 1 + |want|), or differs
    only as ``allowed`` says (:func:`verify_allowance`), and a line saying so."""
    g, w = got.reshape(-1), want.reshape(-1)
    size = f"{got.dtype}{list(got.shape)}"
    if g.dtype.kind == "f":
        bits = f"u{g.dtype.itemsize}"
        same = (g.view(bits) == w.view(bits)) | (np.isnan(g) & np.isnan(w))
        if tol:
            with np.errstate(all="ignore"):
                a, b = g.astype(np.float64), w.astype(np.float64)
                same |= np.abs(a - b) <= tol * (1 + np.abs(b))
    else:
        same = g == w
    if same.all():
        return True, f"{name}: {size}, GPU == interpreter" + (f" (within {tol:g})" if tol else "")
    if allowed:
        n = int((~same).sum())
        differ = "1 element differs" if n == 1 else f"{n} elements differ"
        return True, f"{name}: {size}, GPU ~ interpreter: {differ}, {allowed}"
    i = int(np.flatnonzero(~same)[0])
    return False, (
        f"{name}: {size}, {int((~same).sum())} of {g.size} elements differ, first at {i}: "
        f"GPU {g[i].item()!r}, interpreter {w[i].item()!r}"
    )


def least_tol(got: np.ndarray, want: np.ndarray) -> float:
    """The least ``--tol`` under which the floats ``got`` are within ``want`` (as
    :func:`_agreement` judges); inf where no tolerance is: integers, or a NaN or an infinity
    that the other does not hold."""
    if got.dtype.kind != "f":
        return float("inf")
    g, w = got.reshape(-1).astype(np.float64), want.reshape(-1).astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    same_inf = np.isinf(g) & (g == w)
    apart = ~(both_nan | same_inf)
    if not np.isfinite(g[apart]).all() or not np.isfinite(w[apart]).all():
        return float("inf")
    if not apart.any():
        return 0.0
    return float((np.abs(g[apart] - w[apart]) / (1 + np.abs(w[apart]))).max())


def tol_hint(needed: list[float]) -> str | None:
    """Where the buffers that differ (each its :func:`least_tol`) differ in floats only, a line
    naming the ``--tol`` that accepts them; else None."""
    if not needed or not all(np.isfinite(needed)):
        return None
    most = max(needed)
    if most == 0:  # zeros of either sign, or NaNs of other bits: any tolerance takes them
        return (
            "only floats differ, in their bits alone (0 and -0, or NaNs): --tol 1e-09 accepts them"
        )
    step = 10.0 ** (math.floor(math.log10(most)) - 1)
    tol = math.ceil(most / step) * step  # two digits, at least the difference
    while tol < most:
        tol += step
    return (
        f"only floats differ, by at most {most:.3g} relative to 1 + |interpreter's|: "
        f"--tol {tol:.2g} accepts them"
    )


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``run`` to the subcommands ``sub``."""
    s = command(sub, cmd_run)
    s.add_argument("variant", metavar="VARIANT|FILE.wgsl")
    s.add_argument("--inputs", required=True, help=".npz with one array per binding name")
    s.add_argument(
        "--params",
        help="JSON object of params fields, and of a WGSL file's other uniforms by name (or a file holding one)",
    )
    s.add_argument(
        "--out",
        help="write read_write buffers to this .npz (with --backend both the interpreter's "
        "too, as interp.NAME)",
    )
    s.add_argument(
        "--workgroups",
        help="X,Y,Z (default: the variant's dispatch rule, or the WGSL file's dispatch line)",
    )
    s.add_argument(
        "--constants",
        action="append",
        metavar="NAME=VALUE[,...]",
        help="values of the WGSL file's override declarations, by name or @id (repeatable)",
    )
    s.add_argument(
        "--backend",
        choices=("gpu", "interp", "both"),
        default="gpu",
        help="both: run on the GPU and in the interpreter, compare every read_write buffer, exit 1 "
        "where they differ (a catalog variant's as kvdsl verify judges them)",
    )
    s.add_argument(
        "--subgroup-size",
        type=int,
        help="the interpreter's subgroup size (a power of two in 4..128; default 32, or with "
        "--backend both the adapter's)",
    )
    s.add_argument(
        "--tol",
        type=float,
        help="with --backend both: floats may differ by TOL * (1 + |interpreter's|), integers "
        "not at all (default: bit for bit, and a catalog variant's outputs as kvdsl verify "
        "judges a GPU: quantised codes within one step, floats within the mode's tolerance)",
    )
    add_max_steps(s)
