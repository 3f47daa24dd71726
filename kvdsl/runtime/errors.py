"""The runtime's errors: all :class:`RuntimeError` subclasses, each message self-contained."""

from __future__ import annotations


class CompileError(RuntimeError):
    """A WGSL module failed naga's parse or validation (shader module or pipeline creation).

    ``line`` / ``column`` (1-based) and ``source_line`` locate the first span naga points at, when
    it points at one; ``compiler_message`` is naga's text unchanged.
    """

    def __init__(
        self,
        compiler_message: str,
        line: int | None = None,
        column: int | None = None,
        source_line: str | None = None,
    ) -> None:
        text = compiler_message.strip()
        if line is not None:
            text += f"\nline {line}: {source_line}"
        super().__init__(text)
        self.compiler_message = compiler_message
        self.line = line
        self.column = column
        self.source_line = source_line


# The brief fixes this name for the public API; it shadows the rarely used builtin only inside
# modules that import it from here.
class BufferError(RuntimeError):  # noqa: A001
    """A host buffer does not fit its binding: missing, unexpected, wrong dtype or length."""


class ParamsError(BufferError):
    """The params values do not fit the params struct: a field missing, unknown or out of range."""


class PagedInputError(BufferError):
    """A paged input's values a host must not pass: a slot or page id out of the pool, one
    slot or page written twice in one pass (:func:`kvdsl.runtime.paged.check_pages`)."""


class DeviceError(RuntimeError):
    """The device cannot run the request: no adapter, a missing feature, a limit exceeded."""


class FeatureError(DeviceError):
    """The adapter lacks a feature the kernel's module enables (``shader-f16``, ``subgroup``):
    the kernel is fine, this device cannot run it."""


class WebGPULoaded(DeviceError):
    """Another WebGPU implementation (or other Dawn toggles) asked for after this process
    loaded one: the library is chosen once per process."""
