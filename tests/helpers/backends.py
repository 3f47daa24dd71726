"""The run function of a backend a test is parametrised over."""

from __future__ import annotations

from kvdsl.interp import run as interp_run


def backend_run(backend: str, request):
    """``run`` of the backend ``backend`` names ("interp" or "gpu"); the GPU's asks for the
    ``gpu`` fixture first, so that the test skips where there is none."""
    if backend == "gpu":
        request.getfixturevalue("gpu")
        from kvdsl.runtime import run as gpu_run

        return gpu_run
    return interp_run
