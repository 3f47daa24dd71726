"""What the commands read from the user: JSON values, ``.npz`` inputs, WGSL files, a workgroup
count; each failure a :class:`UsageError` naming the option and the value."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from kvdsl.frontend.errors import position
from kvdsl.ir import Kernel
from kvdsl.kernels.config import KernelConfig


class UsageError(ValueError):
    """Bad command-line input (a file, a JSON value, a list)."""


def load_json(text: str, what: str) -> Any:
    """``text`` as JSON, or the JSON in the file it names (a JSON object or array is never taken
    for a path: past 255 bytes the OS refuses such a name); text that is neither a file nor
    JSON is refused as no such file. A refusal of JSON says where: ``line L column C``."""
    src, name = text, None
    if not text.lstrip().startswith(("{", "[")):
        try:
            is_file = Path(text).is_file()
        except OSError as err:  # a name the OS refuses (past 255 bytes)
            raise UsageError(f"{what}: cannot read {text!r} ({err.strerror})") from None
        if is_file:
            name = text
            try:
                src = Path(text).read_text(encoding="utf-8")
            except OSError as err:
                raise UsageError(f"{what}: cannot read {text!r} ({err.strerror})") from None
            except UnicodeDecodeError as err:
                raise UsageError(f"{what}: {text!r} is not UTF-8 text (byte {err.start})") from None
    _check_nesting(src, what)
    try:
        return json.loads(src, parse_int=lambda digits: _integer(digits, src, what))
    except json.JSONDecodeError as err:
        if name is None and src is text and not text.lstrip().startswith(("{", "[")):
            raise UsageError(
                f"{what}: no such file {text!r} (give a JSON file, or JSON text)"
            ) from None
        where = f"{name!r} is not" if name is not None else "not"
        raise UsageError(
            f"{what}: {where} valid JSON ({err.msg} at {_where(src, err.pos)})"
        ) from None


#: The deepest JSON kvdsl reads: a params object or template variables nest a few levels, and
#: Python's reader recurses once a level (this keeps it far from Python's recursion limit).
MAX_JSON_NESTING = 128
#: The most digits a JSON integer may have: Python's limit on converting decimal text.
MAX_JSON_DIGITS = 4300
_BRACKETS = re.compile(r'[\[{\]}"]')
_STRING_END = re.compile(r'"|\\.', re.S)


def _where(src: str, offset: int) -> str:
    """``line L column C`` of ``offset`` in ``src`` (``column C`` on a one-line text)."""
    line, column = position(src, offset)
    return f"column {column}" if "\n" not in src else f"line {line} column {column}"


def _check_nesting(src: str, what: str) -> None:
    """Refuse JSON whose arrays and objects nest past :data:`MAX_JSON_NESTING`, at the bracket
    that passes it (brackets inside strings are text)."""
    depth, i = 0, 0
    while (m := _BRACKETS.search(src, i)) is not None:
        i = m.end()
        if m.group() == '"':
            while (e := _STRING_END.search(src, i)) is not None and e.group() != '"':
                i = e.end()
            i = len(src) if e is None else e.end()
        elif m.group() in "[{":
            depth += 1
            if depth > MAX_JSON_NESTING:
                raise UsageError(
                    f"{what}: JSON nested more than {MAX_JSON_NESTING} deep (at "
                    f"{_where(src, m.start())}): params and template variables nest a few levels"
                )
        else:
            depth -= 1


def _integer(digits: str, src: str, what: str) -> int:
    """A JSON integer's ``digits`` as an int, refused past :data:`MAX_JSON_DIGITS` digits."""
    if len(digits.lstrip("-")) > MAX_JSON_DIGITS:
        raise UsageError(
            f"{what}: a number of {len(digits.lstrip('-')):,} digits (at "
            f"{_where(src, src.find(digits))}): no params field or template variable holds a number past 20 digits"
        )
    return int(digits)


def load_inputs(path: str) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` archive ``path``, by name (``--inputs``)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--inputs: no such file {path!r}")
    try:
        npz = np.load(p)  # no pickles: an archive of objects is refused, not run
    except (ValueError, OSError, EOFError, zipfile.BadZipFile):
        npz = None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise UsageError(f"--inputs: {path!r} is not an .npz archive of arrays")
    with npz:
        arrays = {}
        for k in npz.files:
            try:
                arrays[k] = npz[k]
            except (ValueError, OSError, EOFError, zipfile.BadZipFile):
                raise UsageError(
                    f"--inputs: {path!r}: array {k!r} cannot be read: it holds objects rather "
                    "than numbers, or is cut short"
                ) from None
        return arrays


def check_paged(
    cfg: KernelConfig, kernel: Kernel, buffers: dict[str, np.ndarray], params: dict
) -> None:
    """The paged session host's checks (:func:`kvdsl.runtime.paged.check_pages`) on the inputs
    of a paged variant, before any backend runs: a slot or page id past the pool or below -1,
    one slot twice in an append, a page two sequences' tables name written, copy pairs onto one
    page or from a page another pair writes, a page twice in a compaction. The entries checked
    are those the dispatch reads (the kernel's extent for the binding); the pool's pages are
    its array's whole pages. ``buffers`` and ``params`` are checked already
    (:func:`kvdsl.runtime.inputs.check_inputs`). ``paged_window`` moves no rows: its page ids
    are numbers it copies, checked by nothing here."""
    from kvdsl.runtime.contract import evaluate
    from kvdsl.runtime.paged import check_pages

    mode = cfg.mode
    if mode not in ("paged_append", "paged_qkv", "paged_read", "paged_copy", "paged_compact"):
        return
    pool_cfg = getattr(cfg, "pool_config", cfg)  # paged_qkv's pools are its append's
    pool = "kv_pages" if "kv_pages" in buffers else "key_pages"
    pages, size = buffers[pool].size // pool_cfg.page_values, pool_cfg.page_size
    extents = dict(kernel.extents)

    def used(name: str) -> np.ndarray | None:
        if name not in buffers:
            return None
        return buffers[name].reshape(-1)[: evaluate(extents[name], kernel, params, buffers)]

    if mode == "paged_copy":
        pairs = used("page_pairs")
        check_pages(pages, size, page_pairs=pairs[: pairs.size // 2 * 2])
    elif mode == "paged_compact":
        check_pages(pages, size, live_pages=used("live_pages"))
    elif mode == "paged_read":
        check_pages(pages, size, read_slots=used("slot_mapping"), page_table=used("page_table"))
    else:
        table, seqlens = used("page_table"), used("seqlens_k")
        whole = table is not None and table.size == seqlens.size * params["maxPages"] > 0
        check_pages(
            pages, size, slot_mapping=used("slot_mapping"), page_table=table,
            seqlens_k=seqlens if whole else None, key_seq=params["keySeq"],
        )  # fmt: skip


def parse_workgroups(text: str | None) -> tuple[int, int, int] | None:
    """``--workgroups X,Y,Z`` as three counts (None when not given)."""
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise UsageError(f"--workgroups={text!r}: expected three non-negative integers X,Y,Z")
    x, y, z = (int(p) for p in parts)
    return x, y, z


def read_wgsl(path: str) -> str:
    """A WGSL file's text (UTF-8, as WGSL source is)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no such WGSL file {path!r}")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{path!r} is not UTF-8 text (byte {err.start}): WGSL source is UTF-8"
        ) from None


def wgsl_file(
    path: str,
    rounded: list[tuple[int | None, str]] | None = None,
    constants: dict[str, str] | None = None,
) -> tuple[Kernel, dict[int, int]]:
    """Parse a WGSL file into a verified kernel and its statement → line map (``rounded`` and
    ``constants``, the overrides' values: :func:`kvdsl.frontend.parse_with_lines`'s)."""
    from kvdsl.frontend import parse_with_lines

    return parse_with_lines(read_wgsl(path), filename=path, rounded=rounded, constants=constants)


def parse_constants(items: list[str] | None) -> dict[str, str]:
    """``--constants NAME=VALUE[,NAME=VALUE]`` (repeatable) as a dict; NAME may be an @id. A
    name given twice is refused (one given by name and by @id, by the frontend)."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in item.split(","):
            name, eq, value = part.partition("=")
            if not eq or not name.strip() or not value.strip():
                raise UsageError(
                    f"--constants: {part!r} is not NAME=VALUE (an override's name or @id, and "
                    "its value)"
                )
            name, value = name.strip(), value.strip()
            if name in out:
                raise UsageError(
                    f"--constants: {name} is given twice ({name}={out[name]} and "
                    f"{name}={value}): give each override one value"
                )
            out[name] = value
    return out
