"""``variant(name)`` of emitted/kvdsl.js under Node.js (tests/node/suggest_check.mjs): an unknown
name's error suggests what the command line suggests (:func:`kvdsl.catalog.suggest`, Python's
difflib): the catalog names spelled like it, or the beginning of a name it misspells. Names are
catalog names misspelt at random (a letter dropped, doubled, replaced or two swapped, a tail cut
off), names of 200 characters or more (where difflib treats frequent characters as junk), and
names near nothing."""

from __future__ import annotations

import json
import random
import subprocess

from kvdsl import catalog
from tests.contract.test_module import node
from tests.helpers.paths import ROOT

CHECK = ROOT / "tests" / "node" / "suggest_check.mjs"
MODULE = ROOT / "emitted" / "kvdsl.js"


def misspelt(name: str, rng: random.Random) -> str:
    """``name`` with one random slip of the hand."""
    i = rng.randrange(len(name) - 1)
    letter = rng.choice("abcdefghijklmnopqrstuvwxyz_0123456789")
    slips = [
        name[:i] + name[i + 1 :],
        name[:i] + name[i] + name[i:],
        name[:i] + letter + name[i + 1 :],
        name[:i] + name[i + 1] + name[i] + name[i + 2 :],
        name[: max(3, i)],
        name[: max(3, i)] + letter,
    ]
    return rng.choice(slips)


def names() -> list[str]:
    rng = random.Random(43)
    variants = list(catalog.VARIANTS)
    typed = [misspelt(rng.choice(variants), rng) for _ in range(150)]
    typed += ["paged_apend", "merge_llama99", "nope", "", "x", "kv", "Copy_llama31_8b"]
    typed += ["ä" + variants[0], variants[1] * 6, "a" * 250, rng.choice(variants) + "_x" * 120]
    return [t for t in typed if t not in catalog.VARIANTS]


def expected(name: str) -> str:
    """The message kvdsl.js's variant(name) throws for an unknown name."""
    near, begins = catalog.suggest(name)
    hint = (
        f"; did you mean {' or '.join(repr(n) for n in near)}?"
        if near
        else f"; did you mean a variant beginning {begins!r}?" if begins is not None else ""
    )
    count = len(catalog.VARIANTS)
    return f"Error: unknown variant '{name}'{hint} (the catalog's {count} names are the keys of variants)"


def test_an_unknown_name_gets_the_suggestions_python_gives(tmp_path):
    typed = names()
    given = tmp_path / "names.json"
    given.write_text(json.dumps(typed))
    run = subprocess.run(
        [node(), str(CHECK), str(MODULE), str(given)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout)
    assert len(got) == len(typed)
    for name, message in zip(typed, got, strict=True):
        assert message == expected(name), name
    # the sample reaches both kinds of suggestion and names near nothing
    kinds = [catalog.suggest(n) for n in typed]
    assert any(near for near, _ in kinds) and any(b for _, b in kinds)
    assert any(not near and b is None for near, b in kinds)
    assert any(len(near) > 1 for near, _ in kinds)
