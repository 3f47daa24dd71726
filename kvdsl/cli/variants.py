"""The catalog's commands: ``list``, ``show``, ``emit`` (the emitted/ folder) and ``legacy``
(kvdsl's kernel for the legacy template's variables)."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import fnmatch
import json
import sys
from pathlib import Path

from kvdsl import catalog
from kvdsl.cli.inputs import UsageError, load_json
from kvdsl.cli.options import command


def listed(pattern: str | None, mode: str | None) -> list[str]:
    """The catalog variants whose name matches ``pattern`` (a shell pattern, ``*int4*``, or
    else text the name contains) and whose mode is ``mode`` (None: any)."""
    if mode is not None and mode not in catalog.MODES:
        near = difflib.get_close_matches(mode, list(catalog.MODES), 1, 0.6)
        guess = f" (did you mean {near[0]!r}?)" if near else ""
        raise UsageError(
            f"--mode={mode!r}{guess}: expected one of {', '.join(sorted(catalog.MODES))}"
        )
    names = [n for n in catalog.VARIANTS if mode is None or catalog.config(n).mode == mode]
    if pattern is None:
        return names
    if any(c in pattern for c in "*?["):
        return [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    return [n for n in names if pattern in n]


def cmd_list(args: argparse.Namespace) -> int:
    """List catalog variants.

    List catalog variants: each one's name, mode and config.
    """
    names = listed(args.pattern, args.mode)
    if not names:
        which = " ".join(
            ([repr(args.pattern)] if args.pattern is not None else [])
            + ([f"--mode {args.mode}"] if args.mode is not None else [])
        )
        print(f"kvdsl list: no variant matches {which}", file=sys.stderr)
        return 0
    if args.json:
        print(json.dumps({n: catalog.describe(n) for n in names}, indent=2))
        return 0
    width = max(map(len, names))
    for name in names:
        cfg = catalog.describe(name)
        mode = cfg.pop("mode")
        opts = " ".join(f"{k}={v}" for k, v in cfg.items())
        print(f"{name:<{width}}  {mode:<12} {opts}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print a variant's WGSL.

    Print a catalog variant's WGSL, after a header naming its config.
    """
    from kvdsl.catalog_files import header
    from kvdsl.emit import emit

    kernel = catalog.build(args.variant)
    sys.stdout.write(header(args.variant, catalog.config(args.variant), kernel))
    sys.stdout.write(emit(kernel))
    return 0


def cmd_emit(args: argparse.Namespace) -> int:
    """Write emitted/<variant>.wgsl and index.json.

    Write one WGSL file per catalog variant and index.json (each variant's config and
    interface), or check that a folder holds what would be written.
    """
    from kvdsl import catalog_files

    out = Path(args.out)
    if args.check:
        diff = catalog_files.stale(out)
        if diff:
            sys.stdout.write(diff)
            print(f"kvdsl: {out}/ is stale: run `kvdsl emit --out {out}`", file=sys.stderr)
            return 1
        print(f"{out}/ is up to date ({len(catalog.VARIANTS)} variants)")
        return 0
    try:
        names = catalog_files.write(out)
    except OSError as err:
        raise UsageError(f"--out: cannot write to {str(out)!r} ({err.strerror})") from None
    print(f"wrote {len(names)} files to {out}/")
    return 0


def cmd_legacy(args: argparse.Namespace) -> int:
    """kvdsl's WGSL for the legacy template's variables.

    Print the WGSL kvdsl emits for the legacy template's variables: the drop-in kernel, with the
    template's bindings, params and dispatch.
    """
    from kvdsl.catalog_files import dispatch_line, limits_line
    from kvdsl.emit import emit
    from kvdsl.kernels.rows import RowConfig
    from kvdsl.ir.features import limits as kernel_limits
    from kvdsl.kernels.config import ConfigError, Reduction, as_dict
    from kvdsl.legacy import MAX_STORAGE_BUFFERS_ALLOWED, binding_note, config_from_vars, json_words

    data = load_json(args.vars, "--vars")
    if not isinstance(data, dict):
        raise UsageError(
            f"--vars: expected a JSON object of template variables, got {json.dumps(data)[:80]}"
        )
    most = None
    if args.max_storage_buffers is not None:
        text = args.max_storage_buffers
        most = int(text) if text.strip().isdigit() else None
        if most is None or most < 8:
            raise UsageError(
                f"--max-storage-buffers {text}: expected {MAX_STORAGE_BUFFERS_ALLOWED}"
            )
    try:
        cfg = config_from_vars(data, most)
    except ConfigError as err:  # the variables are JSON: a value is shown in JSON's words
        raise ConfigError(err.field, err.value, err.allowed, json_words) from None
    if args.subgroups:
        if not (isinstance(cfg, RowConfig) and cfg.k_norm):
            raise UsageError(
                f"--subgroups: expected variables of a K RMSNorm kernel (the only row reduction); "
                f"these make a {cfg.mode} kernel without one"
            )
        cfg = dataclasses.replace(cfg, reduction=Reduction.SUBGROUP)
    kernel = catalog.build_config(cfg)
    wgsl = emit(kernel)
    note = binding_note(cfg)
    limits = kernel_limits(kernel)
    sys.stdout.write(
        f"// kvdsl {cfg.mode} for the legacy template's variables; config: "
        f"{json.dumps(as_dict(cfg))}\n"
        + limits_line(limits)
        + dispatch_line(kernel)
        + (f"// {note}\n" if note else "")
        + "\n"
        + wgsl
    )
    if note:
        print(f"kvdsl legacy: note: {note}", file=sys.stderr)
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``list``, ``show``, ``emit`` and ``legacy`` to the subcommands ``sub``."""
    s = command(sub, cmd_list)
    s.add_argument(
        "pattern",
        nargs="?",
        metavar="PATTERN",
        help="only names matching PATTERN: a shell pattern (*int4*paged*), else text the name "
        "contains (int4)",
    )
    s.add_argument("--mode", metavar="M", help="only variants of mode M (docs/modes.md)")
    s.add_argument("--json", action="store_true", help="configs as JSON")
    s = command(sub, cmd_show)
    s.add_argument("variant")
    s = command(sub, cmd_emit)
    s.add_argument("--out", default="emitted", help="output folder (default: emitted)")
    s.add_argument("--check", action="store_true", help="fail with a diff if the folder is stale")
    s = command(sub, cmd_legacy)
    s.add_argument("--vars", required=True, help="JSON object of template variables (or a file)")
    s.add_argument(
        "--subgroups",
        action="store_true",
        help="K RMSNorm summed across the subgroup (the *_knorm_sg_* drop-ins' form; the device "
        "needs WGSL's subgroups)",
    )
    s.add_argument(
        "--max-storage-buffers",
        metavar="N",
        help="the device's maxStorageBuffersPerShaderStage (8 or more; default WebGPU's 8): "
        "the quantising kernels with rotary keep the template's 9 or 10 bindings where N allows "
        "them, else bind the packed 8 (rotary_table, kv_scale)",
    )
