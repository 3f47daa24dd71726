"""The session group's count of fuzzed steps per host, for its summary line, and the host class
a test parametrised over "interp" and "gpu" runs on."""

from __future__ import annotations

from kvdsl.session import GpuHost, InterpHost

#: Steps run per host ("interp", "gpu"; "paged-interp", "paged-gpu": the paged machine's) and
#: sessions drawn.
STEPS = {"interp": 0, "gpu": 0, "paged-interp": 0, "paged-gpu": 0}
SESSIONS = {"interp": 0, "gpu": 0, "paged-interp": 0, "paged-gpu": 0}


def count(host: str, steps: int) -> None:
    """``steps`` more steps on ``host`` (0: a new session)."""
    STEPS[host] += steps
    if steps == 0:
        SESSIONS[host] += 1


def summary() -> str | None:
    """One line: the fuzzed steps run on each host, or None where none ran."""
    if not any(STEPS.values()):
        return None
    parts = [
        f"{STEPS[h]:,} steps in {SESSIONS[h]:,} sessions on the {name}"
        for h, name in (
            ("interp", "interpreter"),
            ("gpu", "GPU"),
            ("paged-interp", "interpreter (paged)"),
            ("paged-gpu", "GPU (paged)"),
        )
        if STEPS[h]
    ]
    total = {h: STEPS[h] + STEPS[f"paged-{h}"] for h in ("interp", "gpu")}
    parts.append(f"{total['interp']:,} interpreter and {total['gpu']:,} GPU steps in all")
    return "session fuzz: " + "; ".join(parts) + ", each checked against the oracle"


def host_class(request) -> type:
    """The host class ``request.param`` names ("interp" or "gpu"); the GPU's asks for the ``gpu``
    fixture, so that it skips where there is none."""
    if request.param == "gpu":
        request.getfixturevalue("gpu")
        return GpuHost
    return InterpHost
