"""Which cache format to pick: each format's bytes, its attention error and its decode time,
plain and rotated, written to ``docs/formats-quality.md``.

    python benchmarks/quality.py            # writes the page
    python benchmarks/quality.py --check    # exits 1 where the page is not what it would write

The error is of decode attention's output over a cache written in the format (each format's
reference encoder and decoder, :mod:`kvdsl.reference.formats`) against float64 attention over
the unquantised cache (:func:`kvdsl.reference.attention.attention`): ``||O - O_ref|| /
||O_ref||`` over every query head of every seed. The data has the structure real models'
caches have (KIVI and KVQuant report it): K with a few channels 10-50x larger than the rest,
then NeoX rotary at the cache's positions; V Gaussian; one new token's queries Gaussian. A
rotated format quantises ``R k`` (:mod:`kvdsl.reference.rotation`: the whole head, signed
Walsh-Hadamard) and attention takes ``R q``: the scores are unchanged, V is stored as it is and
the output needs no rotation back. Rotating V as well (``R v``, the output rotated back) is
measured beside it, and the page says what it changes. The decode time is
``benchmarks/attention.py``'s, from ``benchmarks/results/attention``; a rotated cache is read by
``attend`` with ``rotation`` set, which rotates Q as it loads it (int8 and int4 timed).

KIVI's 2-bit cache (:mod:`kvdsl.reference.kivi`) and ONNX Runtime WebGPU's 4-bit TurboQuant
cache (:mod:`kvdsl.reference.ort_tq`) are measured from their references; ORT's is kvdsl's
format ``ort_q4`` (written by the appends, builds and the fused QKV kernel, read and timed by
``attend``), KIVI's is the ``kivi_append`` and ``kivi_flush`` kernels (contiguous and paged),
read and timed by ``attend`` (``format="kivi2"``) over a contiguous cache. ORT's format rotates K and V itself
(an unsigned Walsh-Hadamard transform, undone on reading), so it has no rotated row of its own.

Everything is seeded and in numpy: the page is the same on every machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvdsl.reference import formats as rf  # noqa: E402
from kvdsl.reference import kivi, ort_tq  # noqa: E402
from kvdsl.reference.attention import attention  # noqa: E402
from kvdsl.reference.rotation import rotation  # noqa: E402

PAGE = ROOT / "docs" / "formats-quality.md"
ATTENTION = ROOT / "benchmarks" / "results" / "attention" / "attention.json"
COMMAND = "python benchmarks/quality.py"

HEAD_DIMS = (64, 128, 256)
DIM, KV_HEADS, Q_HEADS = 128, 2, 8
TOKENS = (1024, 8192)
SEEDS = (0, 1, 2)
OUTLIERS, OUTLIER_SCALE = 4, (10.0, 50.0)
ROPE_THETA = 500000.0
#: The user-defined 2-bit format the table carries beside the catalog's: per-row asymmetric
#: (the per-token scheme KIVI uses for V), to show what 2 bits per code cost a K cache.
INT2_ASYM = rf.Spec("int2_asym", "asymmetric", 2)


@dataclass(frozen=True)
class Format:
    """A table row: its name, what it is, the bytes of one ``d``-element row, and its round
    trip (a row written and read back, f32); ``kv``, where K and V are written apart (KIVI),
    the round trip of a cache's K and V ``[B, H, T, D]`` together; ``rotates``, where the
    format rotates its rows itself (ORT's TurboQuant), so the table does not rotate it again;
    ``built``, whether kvdsl's kernels write and read it."""

    name: str
    what: str
    row_bytes: Callable[[int], int]
    round_trip: Callable[[np.ndarray], np.ndarray]
    kv: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
    rotates: bool = False
    built: bool = True

    def cache(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """K and V written and read back."""
        return self.kv(k, v) if self.kv else (self.round_trip(k), self.round_trip(v))


def _quantised(fmt: Any) -> tuple[Callable[[int], int], Callable[[np.ndarray], np.ndarray]]:
    def row_bytes(d: int) -> int:
        return 4 * rf.row_words(fmt, d, inline=True)

    def round_trip(x: np.ndarray) -> np.ndarray:
        words, side = rf.quantize_rows(fmt, x, inline=True)
        return rf.dequantize_rows(fmt, words, side, x.shape[-1], inline=True)

    return row_bytes, round_trip


def _kivi(group: int) -> Format:
    def kv(k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out_k, out_v = np.empty_like(k), np.empty_like(v)
        for i in np.ndindex(k.shape[:-2]):
            out_k[i], out_v[i] = kivi.dequantize(kivi.quantize(k[i], v[i], 2, group))
        return out_k, out_v

    def one(x: np.ndarray) -> np.ndarray:
        raise ValueError("KIVI writes K and V apart")

    what = f"KIVI 2-bit: K per channel over {group} tokens, V per {group} channels; f16 stats"
    return Format(f"kivi2 g{group}", what, lambda d: kivi.row_bytes(d, 2, group), one, kv)


def _ort_tq(x: np.ndarray) -> np.ndarray:
    return ort_tq.dequantize(ort_tq.quantize(x), x.shape[-1])


FORMATS = [
    Format("f16", "IEEE half per value", lambda d: 2 * d, lambda x: x.astype(np.float16)),
    Format("int8", "one f32 scale per row", *_quantised("int8")),
    Format("q8_0", "ggml: an f16 scale per 32 values", *_quantised("q8_0")),
    Format("int4", "one f32 scale per row", *_quantised("int4")),
    Format("int4_asym", "f32 scale and minimum per row", *_quantised("int4_asym")),
    Format("q4_0", "ggml: an f16 scale per 32 values", *_quantised("q4_0")),
    Format("int2_asym", "user-defined: f32 scale and minimum per row", *_quantised(INT2_ASYM)),
    _kivi(32),
    _kivi(64),
    Format(
        "ort_q4",
        "ONNX Runtime WebGPU's TurboQuant: its own Hadamard rotation, f32 norm, 4-bit centroids",
        ort_tq.row_bytes,
        _ort_tq,
        rotates=True,
    ),
]


def rope(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """NeoX rotary over the whole head: the pair ``(x[i], x[i + D/2])`` turns by ``pos *
    theta^(-2i/D)``."""
    half = x.shape[-1] // 2
    angle = positions[:, None] * ROPE_THETA ** (-np.arange(half) / half)
    cos, sin = np.cos(angle), np.sin(angle)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def data(seed: int, tokens: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``q [1, Hq, 1, D]``, ``k``, ``v [1, Hkv, T, D]`` (float32), as described above."""
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((KV_HEADS, tokens, DIM))
    for h in range(KV_HEADS):
        channels = rng.choice(DIM, OUTLIERS, replace=False)
        k[h][:, channels] *= rng.uniform(*OUTLIER_SCALE, OUTLIERS)
    k = rope(k, np.arange(tokens, dtype=np.float64))
    v = rng.standard_normal((KV_HEADS, tokens, DIM))
    q = rng.standard_normal((Q_HEADS, 1, DIM))
    return (a[None].astype(np.float32) for a in (q, k, v))


def error(fmt: Format, tokens: int, rotated: str | None) -> float:
    """The relative L2 error of attention over the cache in ``fmt``: unrotated (None), with K
    and Q rotated (``"k"``) or K, V and Q rotated and the output rotated back (``"kv"``)."""
    rot = rotation(DIM)
    num = den = 0.0
    for seed in SEEDS:
        q, k, v = data(seed, tokens)
        lengths = np.array([tokens])
        want = attention(q, k, v, lengths)
        if rotated == "kv":
            kr, vr = fmt.round_trip(rot.rotate(k)), fmt.round_trip(rot.rotate(v))
            have = rot.unrotate(attention(rot.rotate(q), kr, vr, lengths))
        elif rotated == "k":
            have = attention(
                rot.rotate(q), fmt.round_trip(rot.rotate(k)), fmt.round_trip(v), lengths
            )
        else:
            have = attention(q, *fmt.cache(k, v), lengths)
        num += float(np.sum((have - want) ** 2))
        den += float(np.sum(want**2))
    return float(np.sqrt(num / den))


def decode_times(path: Path = ATTENTION) -> tuple[dict[str, float], str]:
    """Attend's time (its merge included) at batch 4, 8,192 tokens, the planned chunks, per
    format (a rotated cache's, and KIVI's groups'), and the device that gave them (KIVI's rows
    name theirs where another device timed them)."""
    if not path.is_file():
        return {}, ""
    att = json.loads(path.read_text())
    at = [r for r in att["rows"] if r["batch"] == 4 and r["tokens"] == 8192]
    times = {r["format"]: r["us"] for r in at if r["kind"] == "bandwidth" and r["planned"]}
    times |= {f"{r['format']} rotated": r["us"] for r in at if r["kind"] == "rotation"}
    times |= {r["format"]: r["us"] for r in at if r["kind"] == "kivi"}
    device = att["device"]["device"]
    other = sorted({r["device"] for r in at if r["kind"] == "kivi" and r.get("device")} - {device})
    return times, device + (f"; KIVI's on {', '.join(other)}" if other else "")


def table() -> list[dict[str, Any]]:
    """One row per format and rotation: bytes per head size, errors per token count."""
    rows = []
    for fmt in FORMATS:
        plain_only = fmt.name == "f16" or fmt.kv or fmt.rotates
        for rotated in (False,) if plain_only else (False, True):
            rows.append(
                {
                    "format": fmt.name + (" rotated" if rotated else ""),
                    "what": fmt.what,
                    "base": fmt.name,
                    "rotated": rotated,
                    "kv": fmt.kv is not None,
                    "built": fmt.built,
                    "bytes": {d: fmt.row_bytes(d) for d in HEAD_DIMS},
                    "error": {t: error(fmt, t, "k" if rotated else None) for t in TOKENS},
                    "error_kv": error(fmt, TOKENS[-1], "kv") if rotated else None,
                }
            )
    return rows


def page(rows: list[dict[str, Any]], times: dict[str, float], device: str) -> str:
    """The Markdown page."""
    int8 = next(r for r in rows if r["format"] == "int8")
    lines = [
        "# Which cache format: bytes, attention error, decode time",
        "",
        f"Generated by `{COMMAND}` (its docstring says how); do not edit.",
        "",
        f"Bytes are one cache row (one token of one KV head, K or V alike) with its scales, at "
        f"head size {', '.join(map(str, HEAD_DIMS))}. The error is decode attention's output over "
        f"a cache in the format against float64 attention over the unquantised cache (relative "
        f"L2, {Q_HEADS} query heads over {KV_HEADS} KV heads of {DIM}, {len(SEEDS)} seeds), on K "
        f"with {OUTLIERS} channels per head {OUTLIER_SCALE[0]:g}-{OUTLIER_SCALE[1]:g}x larger "
        f"than the rest and NeoX rotary applied, V Gaussian. *rotated*: K and Q rotated by the "
        f"signed Walsh-Hadamard matrix of the whole head, K before quantising "
        f"(`kvdsl.reference.rotation`), V as it is: `dense_append` and `dense_build` write it and `attend` reads it with `rotation` set. The time is `attend` with "
        f"its merge (KIVI's too, `format='kivi2'`) at batch 4, 8,192 tokens, 8 KV heads x 128, 32 query heads"
        + (f" ({device}, `benchmarks/attention.py`)." if device else "."),
        "",
        "| format | what | "
        + " | ".join(f"bytes, D={d}" for d in HEAD_DIMS)
        + " | "
        + " | ".join(f"error, {t:,} tokens" for t in TOKENS)
        + f" | x int8's error ({TOKENS[-1]:,}) | attend µs |",
        "|" + "---|" * (4 + len(HEAD_DIMS) + len(TOKENS)),
    ]
    for r in rows:
        t = times.get(r["format"])
        ratio = r["error"][TOKENS[-1]] / int8["error"][TOKENS[-1]]
        lines.append(
            f"| {r['format']} | {r['what']} | "
            + " | ".join(str(r["bytes"][d]) for d in HEAD_DIMS)
            + " | "
            + " | ".join(f"{r['error'][t]:.2e}" for t in TOKENS)
            + f" | {ratio:.2f} | "
            + (f"{t:.0f}" if t is not None else "not timed" if r["built"] else "not built")
            + " |"
        )
    lines += ["", *reading(rows), *timing(times), ""]
    return "\n".join(lines)


def reading(rows: list[dict[str, Any]]) -> list[str]:
    """What the table says, computed from it."""
    by = {r["format"]: r["error"][TOKENS[-1]] for r in rows}
    int8 = by["int8"]
    four = [n for n in by if n.split()[0] in ("int4", "int4_asym", "q4_0")]
    plain = [n for n in four if not n.endswith("rotated")]
    rotated = [n for n in four if n.endswith("rotated")]
    best = min(rotated, key=by.get)
    rot_int8, rot_q4 = by["int8 rotated"] / int8, by["q4_0 rotated"] / by["q4_0"]
    v_change = max(abs(r["error_kv"] / r["error"][TOKENS[-1]] - 1) for r in rows if r["rotated"])
    ratio = by[best] / int8
    out = [
        "Reading it, at " + f"{TOKENS[-1]:,} tokens:",
        "",
        f"- The 4-bit formats unrotated are {min(by[n] for n in plain) / int8:.1f}x to "
        f"{max(by[n] for n in plain) / int8:.1f}x int8's error; rotated, "
        f"{min(by[n] for n in rotated) / int8:.1f}x to {max(by[n] for n in rotated) / int8:.1f}x "
        f"(best: {best}).",
        f"- Rotated, int8's error is {rot_int8:.2f}x its unrotated error and q4_0's {rot_q4:.2f}x: "
        "rotation pays where one scale is stretched by a few large channels (a row's, or a "
        "32-value block's).",
        f"- The best rotated 4-bit format is {ratio:.1f}x unrotated int8's error"
        + (
            ", within 2x."
            if ratio <= 2
            else ", not within 2x: rotation removes the outliers' stretch, but a 4-bit code's "
            "step is still 16x an 8-bit code's over the same range."
        ),
        f"- Rotating V too (and the output back) changes no format's error by more than "
        f"{v_change:.1%}: V has no large channels. So kvdsl rotates K and Q only: `attend` "
        "reads a rotated cache as it reads any, and its output needs no rotation back.",
        f"- 2 bits per value per row (int2_asym) is {by['int2_asym'] / int8:.0f}x int8's error, "
        f"{by['int2_asym rotated'] / int8:.0f}x rotated; KIVI's 2-bit, whose K scales are per "
        f"channel, is {by['kivi2 g32'] / int8:.0f}x at {kivi_bytes(32)} B a row (groups of 32) and "
        f"{by['kivi2 g64'] / int8:.0f}x at {kivi_bytes(64)} B (groups of 64), the residual excluded.",
        f"- ONNX Runtime's TurboQuant (ort_q4, {ort_tq.row_bytes(DIM)} B a row, its own unsigned "
        f"rotation of K and V) is {by['ort_q4'] / int8:.1f}x int8's error, against "
        f"{by['int4 rotated'] / int8:.1f}x for int4 rotated (signed, K only) at the same bytes.",
    ]
    return out


def timing(times: dict[str, float]) -> list[str]:
    """What the decode times say, where the benchmark timed the formats named."""
    need = ("int4", "int8", "ort_q4", "kivi2 g32")
    if not all(n in times for n in need):
        return []
    return [
        f"- Decode time: ort_q4 takes {times['ort_q4']:.0f} µs where int4 takes "
        f"{times['int4']:.0f} and int8 {times['int8']:.0f} (its centroid lookup and the "
        "rotation back of each row cost more than the bytes it saves). KIVI's 2-bit groups of "
        f"32 take {times['kivi2 g32']:.0f} µs through `attend`, split over the keys like the "
        "others; its K is decoded channel by channel from each group's stats, and the newest "
        "tokens come from the f16 residual.",
    ]


def kivi_bytes(group: int) -> int:
    """KIVI 2-bit's bytes per row at the table's head size."""
    return kivi.row_bytes(DIM, 2, group)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 where the page is stale")
    args = ap.parse_args(argv)
    times, device = decode_times()
    text = page(table(), times, device)
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
