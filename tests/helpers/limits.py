"""Running a kernel that binds more storage buffers than WebGPU's default (8 per stage).

The quantising kernels with rotary (9 or 10 bindings) and window_shift ``all`` with rotary (9)
run on a device requested with the storage-buffer limit they need
(:func:`kvdsl.runtime.device.configure`), restored to the defaults afterwards.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from kvdsl.ir import Kernel
from kvdsl.runtime import device

STORAGE_BUFFERS = "max-storage-buffers-per-shader-stage"


@contextmanager
def storage_buffers_for(kernel: Kernel) -> Iterator[None]:
    """Devices made inside allow ``kernel``'s storage bindings (nothing changes at 8 or fewer)."""
    need = len(kernel.bindings)
    if need <= device.WEBGPU_LIMITS[STORAGE_BUFFERS]:
        yield
        return
    got = device.configure({STORAGE_BUFFERS: need})
    assert got[STORAGE_BUFFERS] >= need, f"the adapter allows {got[STORAGE_BUFFERS]}"
    try:
        yield
    finally:
        device.configure(None)
