"""The docs agree with the contract: every ``index.json`` field they name is in its schema, the
lists of modes are the catalog's, and what docs/modes.md says of binding orders and windowed
variants is what the catalog's kernels are."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.contract.schema import schema
from tests.helpers.paths import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
VARIANT = schema()["$defs"]["variant"]


def resolve(node: dict[str, Any], s: dict[str, Any] | None = None) -> dict[str, Any]:
    """``node`` with its ``$ref`` followed (within the schema ``s``)."""
    s = schema() if s is None else s
    while "$ref" in node:
        node = s["$defs"][node["$ref"].rpartition("/")[2]]
    return node


def children(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The properties of ``node`` (of its items, for an array; of each branch of a oneOf)."""
    node = resolve(node)
    out = dict(node.get("properties", {}))
    if "items" in node:
        out |= children(node["items"])
    for branch in node.get("oneOf", []) + node.get("anyOf", []):
        out |= children(branch)
    return out


def field(path: str) -> dict[str, Any] | None:
    """The schema of a variant's field at dotted ``path`` (``pages.page_values``), or None."""
    node: dict[str, Any] | None = VARIANT
    for part in path.split("."):
        node = children(node).get(part) if node is not None else None
    return node


def fields(node: Any) -> Iterator[str]:
    """The name of every property anywhere in the schema ``node``."""
    if isinstance(node, dict):
        yield from node.get("properties", {})
        for v in node.values():
            yield from fields(v)
    elif isinstance(node, list):
        for v in node:
            yield from fields(v)


def strings(node: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)
    elif isinstance(node, str):
        yield node


def index_table() -> list[tuple[list[str], str]]:
    """docs/host.md's table of index.json's fields: each row's field names and its text."""
    text = (ROOT / "docs" / "host.md").read_text()
    section = text.split("## `index.json`\n", 1)[1].split("\n## ", 1)[0]
    table = section.strip().split("\n\n", 1)[0].splitlines()
    rows = []
    for line in table[2:]:
        names, _, meaning = line.strip("|").partition("|")
        rows.append((re.findall(r"`([^`]+)`", names), meaning))
    return rows


def test_host_md_names_only_fields_of_the_schema():
    """Every field of host.md's index.json table is a field of a variant in the schema, and every
    name in backticks in its row is a field under it, or a value the contract holds (an enum of
    the schema, or a string of emitted/index.json: a binding's name, a params field)."""
    index = json.loads((ROOT / "emitted" / "index.json").read_text())
    values = set(strings(index)) | set(strings(schema()))
    rows = index_table()
    assert len(rows) >= 15
    for names, meaning in rows:
        for name in names:
            assert (
                field(name) is not None
            ), f"host.md names index.json field {name!r}: not in the schema"
            below = set(strings(resolve(field(name))))
            for word in re.findall(r"`([a-z][a-z0-9_]*)`", meaning):
                assert word in below or word in values, (
                    f"host.md's row of {name!r} names {word!r}: no field of {name!r} in the "
                    "schema, nor a value index.json holds"
                )


#: "index.json's X", with or without backticks: X a field, or a dotted path of fields.
INDEX_MENTION = re.compile(r"index\.json`?'s `?([a-z_]+(?:\.[a-z_]+)*)`?")
#: A backticked path of fields from a variant's object field (``pages.page_values``).
FIELD_PATH = re.compile(r"`((?:pages|dispatch)\.[a-z_]+)`")


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_index_json_field_the_docs_name_is_in_the_schema(doc):
    text = doc.read_text()
    named = INDEX_MENTION.findall(text) + FIELD_PATH.findall(text)
    words = {"entry", "and", "fields", "own", "data", "modes"}  # "index.json's entry" is prose
    anywhere = set(fields(schema()))
    for path in named:
        if path in words:
            continue
        found = field(path) is not None if "." in path else path in anywhere
        assert found, f"{doc.name} names index.json's {path!r}: not in the schema"


def test_the_lists_of_modes_are_the_catalogs():
    """host.md's row of ``mode``, the schema's enum and kvdsl.d.ts's ``Mode`` name every mode
    of the catalog, each once."""
    modes = sorted(catalog.MODES)
    assert sorted({cfg.mode for cfg in catalog.VARIANTS.values()}) == modes
    assert sorted(VARIANT["properties"]["mode"]["enum"]) == modes
    [(_, row)] = [(n, m) for n, m in index_table() if n == ["mode"]]
    listed = re.findall(r"`([a-z_0-9]+)`", row)
    assert sorted(listed) == modes, "host.md's modes"
    dts = (ROOT / "emitted" / "kvdsl.d.ts").read_text()
    union = dts.split("export type Mode =", 1)[1].split(";", 1)[0]
    assert sorted(json.loads(m) for m in re.findall(r'"[a-z_0-9]+"', union)) == modes
    assert "readonly mode: Mode;" in dts


def section(doc: str, heading: str) -> str:
    """The text of ``## heading`` in docs/``doc`` (to the next heading of its level)."""
    text = (ROOT / "docs" / doc).read_text()
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_modes_md_gives_qkvs_bindings_in_the_contracts_order():
    """The names modes.md's qkv section lists as its bindings, in order, come in that order in
    every qkv variant's kernel (side scales among them)."""
    text = section("modes.md", "qkv")
    listing = text.split("- Bindings, in order", 1)[1].split("\n- ", 1)[0]
    qkv = {n: catalog.build(n) for n, c in catalog.VARIANTS.items() if c.mode == "qkv"}
    names = {b.name for k in qkv.values() for b in k.bindings if b.name != "params"}
    order = list(dict.fromkeys(w for w in re.findall(r"`([a-z_]+)`", listing) if w in names))
    assert set(order) == names, f"modes.md's qkv bindings: {order} of {sorted(names)}"
    assert "present_scales" in order
    for name, kernel in qkv.items():
        bound = [b.name for b in kernel.bindings if b.name != "params"]
        assert [n for n in order if n in bound] == bound, name


def test_modes_md_names_the_modes_with_windowed_variants():
    text = (ROOT / "docs" / "modes.md").read_text()
    windowed = text.split("## Windowed variants\n", 1)[1].split(" have windowed variants", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", windowed))
    have = {c.mode for c in catalog.VARIANTS.values() if getattr(c, "window", False)}
    assert named == have
    assert text.count("has windowed variants") + text.count("have windowed variants") == 1


# ---- docs/formats.md: where an int4_asym row's side stats sit, and in which order ----------------


def _nibbles(words: np.ndarray) -> np.ndarray:
    """The 4-bit codes of u32 words, element ``8 w + l`` in bits ``4 l`` of word ``w``."""
    shifts = np.arange(8, dtype=np.uint32) * np.uint32(4)
    return ((words[..., None] >> shifts) & np.uint32(15)).reshape(*words.shape[:-1], -1)


def test_formats_md_side_stats_of_a_contiguous_row():
    """Row ``r``'s side scales start at f32 ``r * 2 S`` (``S`` = 2 for int4_asym): K's scale,
    K's min, V's scale, V's min; ``dense_read`` decodes by them as formats.md says."""
    from kvdsl.interp import run as interp_run

    name = "dense_read_int4_asym_side_llama31_8b"
    kernel, rows, d = catalog.build(name), 3, 128
    rng = np.random.default_rng(11)
    words = {n: rng.integers(0, 2**32, (rows, d // 8), dtype=np.uint32) for n in ("k", "v")}
    stats = rng.uniform(0.25, 2, (rows, 4)).astype(np.float32) * rng.choice([-1, 1], (rows, 4))
    buffers = {
        "cache_key": words["k"].reshape(-1),
        "cache_value": words["v"].reshape(-1),
        "cache_scales": stats.reshape(-1).astype(np.float32),
        "key": np.full(rows * d, np.nan, np.float32),
        "value": np.full(rows * d, np.nan, np.float32),
    }
    out = interp_run(kernel, buffers, {"count": rows})
    for which, first in (("k", 0), ("v", 2)):
        scale, low = stats[:, first, None], stats[:, first + 1, None]
        want = _nibbles(words[which]).astype(np.float32) * scale + low
        got = out["key" if which == "k" else "value"].reshape(rows, d)
        # within an ulp or two, as the decoder's order of operations rounds; stats taken from
        # another place, or in another order, are off by whole scales
        np.testing.assert_allclose(got, want, rtol=2**-21, atol=0)


def test_formats_md_scale_pages_rows_of_an_hnd_page():
    """In an ``hnd`` page, row ``(slot, h)``'s side scales are at ``(h * page_size + slot) * 2 S``
    of the page's ``page_size * H * 2 S`` f32: ``paged_read`` decodes by them as formats.md
    says (the case's page table, with its -1 entries, and its seqlens_k)."""
    from kvdsl.harness.cases import cases_for
    from kvdsl.interp import run as interp_run

    name = "paged_read_int4_asym_side_p64_hnd_f16_llama31_8b"
    cfg, kernel = catalog.config(name), catalog.build(name)
    assert cfg.page_layout.value == "hnd"
    case = cases_for(cfg, 1, seed=5)[0]
    out = interp_run(kernel, {k: v.copy() for k, v in case.buffers.items()}, case.params)
    p, h_n, d, seq = cfg.page_size, cfg.kv_heads, cfg.head_dim, case.params["seq"]
    max_pages = case.params["maxPages"]
    table, lengths = case.buffers["page_table"], case.buffers["seqlens_k"]
    stats = case.buffers["scale_pages"].reshape(-1, h_n * p, 4)  # page, row, K's 2 then V's 2
    checked = 0
    for which, pool, first in (("key", "key_pages", 0), ("value", "value_pages", 2)):
        codes = case.buffers[pool].reshape(-1, h_n * p, d // 8)
        got = out[which].reshape(lengths.size, h_n, seq, d)
        for b, length in enumerate(lengths):
            for pos in range(min(seq, int(length) + 1)):
                page = int(table[b * max_pages + pos // p])
                if page < 0:
                    continue
                for h in range(h_n):
                    row = h * p + pos % p  # hnd: head h's slots together
                    scale, low = stats[page, row, first : first + 2]
                    q = _nibbles(codes[page, row]).astype(np.float32)
                    want = q * scale + low  # f16 within one ulp: rounded through f32
                    np.testing.assert_allclose(got[b, h, pos], want, rtol=2**-10, atol=0)
                    checked += 1
    assert checked > 0
