"""Which WebGPU implementation runs kernels, and how it is set up: a value chosen explicitly.

wgpu-native (the ``wgpu`` package; naga compiles WGSL) is the default. Dawn, the implementation
inside Chrome (the ``wgpudawn`` package, the same Python API; Tint compiles WGSL), is the other.
The two libraries cannot share a process, so a process loads one of them, once:
:func:`kvdsl.runtime.use_webgpu` chooses it before the first GPU work, and without that call the
first GPU work loads the default.

Dawn gets its ``timestamp_quantization`` toggle turned off always, so timestamp queries keep their
resolution (a browser quantises them; a benchmark must not); :attr:`WebGPU.dawn_disable` names
more toggles to turn off (``disable_workgroup_init``, ``disable_robustness``: what Chrome's
zeroing or robustness costs) and :attr:`WebGPU.dawn_enable` toggles to turn on
(``vulkan_enable_f16_on_nvidia`` gives an NVIDIA adapter under Vulkan the ``shader-f16``
feature, which Dawn, and so Chrome, leaves off there by default).

wgpu-native's naga bounds every loop of a module with a counter of its own, so that a loop the
driver cannot prove finite still ends (``WGPUShaderRuntimeChecks_ForceLoopBounding``).
:attr:`WebGPU.loop_bounding` false creates modules through
``wgpuDeviceCreateShaderModuleTrusted`` with bounds checks alone: a host may do so for kernels
whose loops all end, as kvdsl's counted loops do.

:meth:`WebGPU.from_environment` reads the documented variables, for the edges that take settings
from the environment (the ``kvdsl`` command, the test suite); nothing else reads them:

- ``KVDSL_WEBGPU``: ``wgpu-native`` (the default) or ``dawn``;
- ``KVDSL_DAWN_ENABLE``, ``KVDSL_DAWN_DISABLE``: Dawn toggles to turn on or off,
  comma-separated (read under ``dawn`` only);
- ``KVDSL_LOOP_BOUNDING``: ``1`` (the default) or ``0``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kvdsl.runtime.errors import DeviceError

IMPLEMENTATIONS = ("wgpu-native", "dawn")

#: Turned off under Dawn whatever else is asked (see the module doc).
ALWAYS_DISABLED = ("timestamp_quantization",)

_LOOP_BOUNDING_NEEDS_NAGA = (
    "needs wgpu-native: it turns off naga's loop counters, and {} compiles with Tint"
)


@dataclass(frozen=True)
class WebGPU:
    """A WebGPU implementation and its settings (see the module doc)."""

    implementation: str = "wgpu-native"
    dawn_enable: tuple[str, ...] = ()
    dawn_disable: tuple[str, ...] = ()
    loop_bounding: bool = True

    def __post_init__(self) -> None:
        if self.implementation not in IMPLEMENTATIONS:
            raise DeviceError(
                f"WebGPU implementation {self.implementation!r}: expected one of "
                f"{', '.join(IMPLEMENTATIONS)}"
            )
        if self.implementation != "dawn" and (self.dawn_enable or self.dawn_disable):
            raise DeviceError(
                f"Dawn toggles under {self.implementation}: they need implementation 'dawn'"
            )
        if not self.loop_bounding and self.implementation != "wgpu-native":
            raise DeviceError(
                "loop_bounding=False " + _LOOP_BOUNDING_NEEDS_NAGA.format(self.implementation)
            )

    @property
    def dawn_toggles(self) -> dict[str, list[str]] | None:
        """The Dawn toggles asked for beyond the default (``{"enable": [...], "disable":
        [...]}``), None under wgpu-native: what a run's record keeps."""
        if self.implementation != "dawn":
            return None
        return {"enable": list(self.dawn_enable), "disable": list(self.dawn_disable)}

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str], implementation: str | None = None
    ) -> WebGPU:
        """The settings the ``KVDSL_*`` variables of ``environ`` name (the module doc lists
        them); ``implementation`` (the command line's ``--webgpu``) overrides ``KVDSL_WEBGPU``.
        A bad value raises :class:`DeviceError` naming the variable."""
        name = implementation or environ.get("KVDSL_WEBGPU", "").strip() or "wgpu-native"
        if name not in IMPLEMENTATIONS:
            raise DeviceError(
                f"KVDSL_WEBGPU={name!r}: expected one of {', '.join(IMPLEMENTATIONS)}"
            )
        text = environ.get("KVDSL_LOOP_BOUNDING", "").strip() or "1"
        if text not in ("0", "1"):
            raise DeviceError(f"KVDSL_LOOP_BOUNDING={text!r}: expected 0 or 1")
        if text == "0" and name != "wgpu-native":
            raise DeviceError("KVDSL_LOOP_BOUNDING=0 " + _LOOP_BOUNDING_NEEDS_NAGA.format(name))
        toggles: dict[str, tuple[str, ...]] = {"enable": (), "disable": ()}
        if name == "dawn":
            if importlib.util.find_spec("wgpudawn") is None:
                raise DeviceError(
                    "KVDSL_WEBGPU='dawn' needs the wgpudawn package (pip install wgpudawn)"
                )
            for kind in toggles:
                var = f"KVDSL_DAWN_{kind.upper()}"
                names = tuple(t for t in (t.strip() for t in environ.get(var, "").split(",")) if t)
                check_toggles(names, f"{var}={environ.get(var)!r}")
                toggles[kind] = names
        return cls(name, toggles["enable"], toggles["disable"], text == "1")


def check_toggles(names: Iterable[str], what: str) -> None:
    """Raise :class:`DeviceError` (``what``: the setting, for the message) when one of
    ``names`` is not a Dawn toggle (wgpudawn's ``all_toggles()``)."""
    names = list(names)
    if not names:
        return
    from wgpudawn.backends.dawn.extras import all_toggles

    known = all_toggles()
    for name in names:
        if name not in known:
            raise DeviceError(f"{what}: Unknown Dawn toggle {name!r}: see all_toggles()")
