"""``kvdsl inputs``: an ``.npz`` of a variant's inputs and a JSON of its params, from the host
contract, for ``kvdsl run VARIANT --inputs X.npz --params P.json``.

With ``--shape`` the contract (:func:`kvdsl.contract.entry`) sizes every binding for the shape
variables' values and gives each params field's value by its formula; the arrays are random, of
the binding's host type, the integer inputs that address memory valid
(:mod:`kvdsl.harness.shaped`), and a binding the kernel only writes (``use`` ``write``)
poisoned, so that what the kernel does not store shows. With ``--case`` they are a verification case's
(:mod:`kvdsl.harness.cases`), its outputs poisoned. Either way the inputs pass every check
``kvdsl run`` makes before it runs, or the command refuses the shape in words.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from kvdsl import catalog
from kvdsl.cli.inputs import UsageError, check_paged
from kvdsl.cli.options import command, count, whole

#: The most bytes of inputs ``kvdsl inputs`` writes (a shape past it is refused before any
#: array is made).
MOST_BYTES = 1 << 30


def parse_shape(text: str, variables: list[str], variant: str) -> dict[str, int]:
    """``--shape NAME=N,...`` as values of ``variables`` (the variant's shape variables, every
    one given once, each a whole number)."""
    given: dict[str, int] = {}
    for part in text.split(","):
        name, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not name:
            raise UsageError(f"--shape: {part.strip()!r} is not NAME=VALUE")
        if name not in variables:
            raise UsageError(
                f"--shape: variant {variant} has no shape variable {name!r}; its shape "
                f"variables are {', '.join(variables)}"
            )
        if name in given:
            raise UsageError(f"--shape: {name} is given twice")
        if not value.isdigit() or len(value) > 12:
            raise UsageError(
                f"--shape: {name}={value}: expected a whole number from 0 to 999999999999"
            )
        given[name] = int(value)
    missing = [v for v in variables if v not in given]
    if missing:
        raise UsageError(
            f"--shape: give {', '.join(missing)} too (variant {variant}'s shape variables are "
            f"{', '.join(variables)})"
        )
    return given


def _param(text: str) -> tuple[str, float]:
    """``--param NAME=VALUE``: the name and its finite number."""
    name, eq, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not eq or not name or not np.isfinite(number):
        raise UsageError(f"--param {text!r}: expected NAME=VALUE with a finite number")
    return name, number


def _shown(shape: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


def from_shape(
    variant: str, shape_text: str, seed: int, chosen: dict[str, float] | None = None
) -> tuple[dict[str, int], dict[str, np.ndarray], dict[str, int | float]]:
    """The shape, random inputs and params of ``variant`` for ``--shape shape_text``; a params
    field without a formula (a model's number: attend's ``scale``) takes its value from
    ``chosen`` (``--param``)."""
    chosen = chosen or {}
    from kvdsl.contract import entry
    from kvdsl.contract.expr import evaluate
    from kvdsl.contract.index import ContractError, check_requirements
    from kvdsl.harness.shaped import ShapeError, shaped_inputs
    from kvdsl.reference.judge import poison

    cfg, kernel = catalog.config(variant), catalog.build(variant)
    e = entry(kernel, cfg)
    shape = parse_shape(shape_text, e["shape"], variant)
    params: dict[str, int | float] = {}
    unknown = sorted(set(chosen) - {p["name"] for p in e["params"] if "value" not in p})
    if unknown:
        raise UsageError(
            f"--param {unknown[0]}: not a params field the host chooses for {variant}; "
            f"those are: {', '.join(p['name'] for p in e['params'] if 'value' not in p) or 'none'}"
        )
    for p in e["params"]:
        if "value" not in p and p["name"] in chosen:
            params[p["name"]] = chosen[p["name"]]
            continue
        if "value" not in p:
            raise UsageError(
                f"variant {variant}: params field '{p['name']}' has no formula in the contract "
                f"(the host chooses it: {p['meaning']}); give it with --param "
                f"{p['name']}=VALUE, give --case, or write the params"
            )
        params[p["name"]] = evaluate(p["value"], shape, "shape variable")
    early = dict(e, requires=[r for r in e["requires"] if "largest" not in r])
    try:  # the requirements on the params alone, before any array is made
        check_requirements(early, params, name=variant)
    except ContractError as err:
        raise UsageError(f"--shape {_shown(shape)}: {err}") from None
    counts: dict[str, tuple[int, np.dtype]] = {}
    total = 0
    for b in e["bindings"]:
        if b["access"] == "uniform":
            continue
        binding = kernel.binding(b["name"])
        n = evaluate(b["elements"], shape, "shape variable") * binding.host_values
        counts[b["name"]] = (n, binding.host.dtype)
        total += n * binding.host.dtype.itemsize
    if total > MOST_BYTES:
        raise UsageError(
            f"--shape {_shown(shape)}: the inputs would take {total:,} bytes; kvdsl inputs "
            f"writes at most {MOST_BYTES:,} (1 GiB): give smaller values"
        )
    rng = np.random.default_rng(seed)
    try:
        buffers = shaped_inputs(cfg, shape, counts, rng)
    except ShapeError as err:
        raise UsageError(f"--shape: {err}") from None
    for b in e["bindings"]:  # what the kernel only writes starts poisoned: unwritten shows
        if b["use"] == "write":
            buffers[b["name"]] = poison(*counts[b["name"]])
    _check(variant, cfg, kernel, e, shape, buffers, params)
    return shape, buffers, params


def _check(variant, cfg, kernel, e, shape, buffers, params) -> None:
    """The checks ``kvdsl run`` makes before it runs, on inputs made for ``shape``: a refusal
    names the shape and the contract's size of a binding too short for it."""
    from kvdsl.runtime.contract import check_contract
    from kvdsl.runtime.errors import BufferError
    from kvdsl.runtime.inputs import check_inputs

    try:
        check_inputs(kernel.bindings, kernel.params, buffers, params, variant, contract=kernel)
        check_paged(cfg, kernel, buffers, params)
        check_contract(kernel, buffers, params)
    except BufferError as err:
        sizes = "; ".join(
            f"'{b['name']}' is {b['elements']} elements"
            for b in e["bindings"]
            if f"'{b['name']}'" in str(err) and b["access"] != "uniform"
        )
        raise UsageError(
            f"--shape {_shown(shape)}: {err}" + (f" (the contract sizes {sizes})" if sizes else "")
        ) from None


def from_case(
    variant: str, number: int, seed: int
) -> tuple[dict[str, int], dict[str, np.ndarray], dict[str, int | float]]:
    """The shape, inputs and params of verification case ``number`` of ``variant`` (its
    ``kvdsl verify --seed seed``'s)."""
    from kvdsl.harness import CASES, cases_for

    cfg = catalog.config(variant)
    if cfg.mode not in CASES:
        raise UsageError(f"--case: mode {cfg.mode} has no verification cases; give --shape")
    case = cases_for(cfg, number + 1, seed)[number]
    return dict(case.shape), dict(case.buffers), dict(case.params)


def _json_value(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def cmd_inputs(args: argparse.Namespace) -> int:
    """Write a variant's inputs (.npz) and params (JSON) from its contract.

    Write a catalog variant's inputs (an .npz, one array per binding) and params (a JSON object)
    for `kvdsl run VARIANT --inputs X.npz --params P.json`: random values for a shape (--shape;
    the integer inputs that address memory valid), or a verification case (--case).
    """
    if (args.shape is None) == (args.case is None):
        raise UsageError("give --shape NAME=N,... (random inputs) or --case [N] (a verification "
                         "case), one of the two")  # fmt: skip
    catalog.config(args.variant)  # an unknown name fails before any work
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {args.out!r} is a file: expected a folder")
    inputs = Path(args.inputs_out) if args.inputs_out else out / f"{args.variant}.npz"
    params_path = Path(args.params_out) if args.params_out else out / f"{args.variant}.params.json"
    if inputs.suffix != ".npz":
        raise UsageError(f"--inputs-out: {str(inputs)!r}: expected a file name ending in .npz")
    if args.shape is not None:
        chosen = dict(_param(text) for text in args.param)
        shape, buffers, params = from_shape(args.variant, args.shape, args.seed, chosen)
    else:
        shape, buffers, params = from_case(args.variant, args.case, args.seed)
    try:
        for path in (inputs, params_path):
            path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(inputs, **buffers)
        params_path.write_text(
            json.dumps({k: _json_value(v) for k, v in params.items()}, indent=2) + "\n"
        )
    except OSError as err:
        raise UsageError(f"cannot write {err.filename!r} ({err.strerror})") from None
    print(f"wrote {inputs} ({len(buffers)} arrays) and {params_path} for {_shown(shape)}")
    print(f"run: kvdsl run {args.variant} --inputs {inputs} --params {params_path}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``inputs`` to the subcommands ``sub``."""
    s = command(sub, cmd_inputs)
    s.add_argument("variant")
    s.add_argument(
        "--shape",
        metavar="NAME=N,...",
        help="the variant's shape variables (index.json's shape: `kvdsl inputs VARIANT "
        "--shape x=1` names them), every one",
    )
    s.add_argument(
        "--case",
        type=whole(0, 99),
        nargs="?",
        const=0,
        metavar="N",
        help="verification case N (0 to 99, default 0) of `kvdsl verify --seed SEED` instead",
    )
    s.add_argument("--seed", type=count, default=0, help="random seed (default 0)")
    s.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a params field the host chooses (no formula in index.json: attend's scale, "
        "softcap), with --shape; repeatable",
    )
    s.add_argument(
        "--out", default=".", help="folder of VARIANT.npz and VARIANT.params.json (default: .)"
    )
    s.add_argument("--inputs-out", metavar="FILE.npz", help="the inputs' file instead")
    s.add_argument("--params-out", metavar="FILE.json", help="the params' file instead")
