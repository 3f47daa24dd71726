"""The run function of a backend a test is parametrised over."""

from __future__ import annotations

import numpy as np

from kvdsl.interp import run as interp_run


def backend_run(backend: str, request):
    """``run`` of the backend ``backend`` names ("interp" or "gpu"); the GPU's asks for the
    ``gpu`` fixture first, so that the test skips where there is none."""
    if backend == "gpu":
        request.getfixturevalue("gpu")
        from kvdsl.runtime import run as gpu_run

        return gpu_run
    return interp_run


def ieee_adapter() -> bool:
    """Whether the GPU's f32 arithmetic is IEEE's to the bit, as the interpreter's and numpy's
    are: llvmpipe's (no fused multiply-add, division correctly rounded, f16 rounded at each
    step), CI's adapter. Another GPU may fuse a product into a sum, divide to WGSL's 2.5 ULP or
    carry f16 arithmetic in f32."""
    from kvdsl.runtime import adapter_info

    return adapter_info()["vendor"] == "llvmpipe"


def assert_as_numpy(
    got, want, run=None, err_msg="", eps=2.0**-23, ulps=4, scale=None, codes=False
):  # fmt: skip
    """``got`` is numpy's ``want``: bit for bit from the interpreter and from a GPU whose
    arithmetic is IEEE's (:func:`ieee_adapter`); from another GPU (``run`` is the runtime's,
    or the string ``"gpu"``) floats within ``ulps`` units of ``eps`` (f32's ulp at 1; 2^-10
    for f16 arithmetic) of ``scale`` (the magnitude of the rounded operations' results; by
    default the array's largest), and with ``codes`` integers (a unorm or snorm texel's
    code) within one. A wrong element, or none written, is far past either."""
    on_gpu = run == "gpu" or getattr(run, "__module__", "").startswith("kvdsl.runtime")
    if not on_gpu or ieee_adapter():
        np.testing.assert_array_equal(got, want, err_msg=err_msg)
        return
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind in "iu":
        if not codes:
            np.testing.assert_array_equal(got, want, err_msg=err_msg)
            return
        np.testing.assert_allclose(got.astype(np.int64), want.astype(np.int64), atol=1, rtol=0)
        return
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=err_msg)
    if scale is None:
        scale = float(np.abs(want[finite]).max()) if finite.any() else 0.0
    atol = ulps * eps * scale
    np.testing.assert_allclose(got[finite], want[finite], rtol=0, atol=atol, err_msg=err_msg)
    np.testing.assert_array_equal(got[~finite], want[~finite], err_msg=err_msg)
