"""What WGSL takes only on a device with a feature: storage textures of the texel formats WebGPU
binds under a device feature (``bgra8unorm-storage``, ``texture-formats-tier1``), taken where the
entry point does not name them (left out of the kernel, as of the pipeline) and refused as Tint
refuses them where it does; and the extensions of the vertex and fragment stages a compute module
may enable, kept as directives, the runtime (and Tint's worker) requesting their features. Each
run on the interpreter and on the GPU (llvmpipe will do) into poisoned outputs, to what numpy
says; ``kvdsl check`` passes them on wgpu-native and on Dawn."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.frontend.entry import STAGE_EXTENSIONS
from kvdsl.frontend.slots import FEATURE_FORMATS
from kvdsl.runtime import compile_wgsl, tint_check
from tests.helpers.backends import backend_run
from tests.helpers.forms import ENTRY, HEAD, POISON, N
from tests.helpers.paths import ROOT
from tests.helpers.textures import BACKENDS


def _declared(fmt: str, access: str = "write") -> str:
    """A kernel declaring storage texture ``img`` of ``fmt`` and a helper that names it, neither
    named by the entry point, which writes ``out[i] = a[i] * 3 + 7``."""
    value = "vec4<f32>(1.0)"
    if fmt.endswith("int"):
        value = "vec4<u32>(1u)" if fmt.endswith("uint") else "vec4<i32>(1i)"
    use = f"textureStore(img, c, {value});" if access != "read" else "let v = textureLoad(img, c);"
    return (
        HEAD
        + f"@group(0) @binding(2) var img: texture_storage_2d<{fmt}, {access}>;\n"
        + f"fn paint(c: vec2<u32>) {{\n  {use}\n}}\n"
        + ENTRY
        + "  let img = gid.x;\n  out[img] = a[img] * 3u + 7u;\n}\n"
    )


def _named(fmt: str, access: str) -> str:
    """The kernel of :func:`_declared` whose entry point calls the helper naming ``img``."""
    return _declared(fmt, access).replace(
        "  let img = gid.x;", "  paint(gid.xy);\n  let img = gid.x;"
    )


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4444)
    return {
        "a": rng.integers(1, 1 << 20, N, dtype=np.uint32),
        "out": np.full(N, POISON, np.uint32),
    }


def test_a_feature_format_the_entry_point_does_not_name_leaves_the_kernel():
    texts = {}
    for fmt in FEATURE_FORMATS:
        for access in ("write", "read", "read_write"):
            text = _declared(fmt, access)
            k = parse(text)
            assert (k.textures, [f.name for f in k.functions]) == ((), [])
            assert parse(emit(k)) == k
            texts[f"{fmt}.{access}"] = text
    assert len(texts) == 3 * 24
    assert {n: e for n, e in tint_check(texts).items() if e is not None} == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_its_kernel_runs_as_numpy_says(backend, request):
    # The GPU binds no texture of the three (a read_write rgba32float one it could not bind).
    text = (
        _declared("bgra8unorm")
        + "@group(0) @binding(3) var r: texture_storage_2d<r16float, read>;\n"
        # read_write in a format WebGPU binds no such texture in: left out too
        + "@group(0) @binding(4) var w: texture_storage_2d<rgba32float, read_write>;\n"
    )
    k = parse(text)
    printed = emit(k)
    assert "texture" not in printed
    compile_wgsl(text)  # naga takes the text (it leaves the textures out of its layout)
    compile_wgsl(printed)
    got = backend_run(backend, request)(k, _inputs(), {}, (N // 64, 1, 1))
    assert sorted(got) == ["out"]
    np.testing.assert_array_equal(got["out"], _inputs()["a"] * 3 + 7)


def test_a_feature_format_the_entry_point_names_is_refused_as_tint_refuses_it():
    texts = {}
    for fmt in FEATURE_FORMATS:
        for access in ("write", "read", "read_write"):
            name = f"{fmt}.{access}"
            texts[name] = _named(fmt, access)
            with pytest.raises(WgslTypeError) as err:
                parse(texts[name], f"{name}.wgsl")
            assert str(err.value) == (
                f"{name}.wgsl:3: texture 'img': format {fmt} does not support storage texture "
                f"access {access} (WebGPU binds one only under the device feature "
                f"{FEATURE_FORMATS[fmt]}, which kvdsl does not request; the formats it binds are "
                "rgba8unorm, rgba8snorm, rgba8uint, rgba8sint, rgba16uint, rgba16sint, "
                "rgba16float, rgba32float, rgba32uint, rgba32sint, rg32float, rg32uint, rg32sint, "
                "r32float, r32uint, r32sint)"
            )
    for name, got in tint_check(texts).items():
        # A norm16 format is no texture format at all without the feature.
        norm16 = name.split(".")[0].endswith(("16unorm", "16snorm"))
        words = (
            "reason: requires feature FeatureName::TextureFormatsTier1"
            if norm16
            else "does not support storage texture access StorageTextureAccess::"
        )
        assert words in got, (name, got)


def _extension_kernel(ext: str) -> str:
    return f"enable {ext};\n" + HEAD + ENTRY + "  out[gid.x] = a[gid.x] * 3u + 7u;\n}\n"


@pytest.mark.parametrize("ext", STAGE_EXTENSIONS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_extension_of_the_other_stages_is_kept_and_the_kernel_runs(ext, backend, request):
    text = _extension_kernel(ext)
    k = parse(text)
    printed = emit(k)
    assert k.directives == (f"enable {ext}",) and printed.startswith(f"enable {ext};\n")
    assert parse(printed) == k
    got = backend_run(backend, request)(k, _inputs(), {}, (N // 64, 1, 1))
    np.testing.assert_array_equal(got["out"], _inputs()["a"] * 3 + 7)


def test_the_compilers_take_them_on_a_device_with_their_features():
    texts = {e: _extension_kernel(e) for e in STAGE_EXTENSIONS}
    texts["all"] = _extension_kernel(", ".join(STAGE_EXTENSIONS))
    for text in texts.values():
        compile_wgsl(text)
        compile_wgsl(emit(parse(text)))
    printed = {f"{n}/printed": emit(parse(t)) for n, t in texts.items()}
    assert tint_check(texts | printed) == dict.fromkeys(texts | printed)


#: The extensions refused: name -> (kvdsl's words, Tint's)
REFUSED = {
    "atomic_vec2u_min_max": (
        "extension 'atomic_vec2u_min_max' is not allowed in the current environment (an "
        "extension of Tint's, not WGSL's",
        "extension 'atomic_vec2u_min_max' is not allowed in the current environment",
    ),
    "chromium_experimental_subgroup_matrix": (
        "extension 'chromium_experimental_subgroup_matrix' is not allowed in the current",
        "extension 'chromium_experimental_subgroup_matrix' is not allowed in the current",
    ),
    "texture_formats_tier1": (
        "enable texture_formats_tier1: expected extension (WGSL's are f16, subgroups, "
        "clip_distances, dual_source_blending, primitive_index)",
        "error: expected extension",
    ),
}


def test_the_extensions_tint_refuses_are_refused_in_its_words():
    texts = {e: _extension_kernel(e) for e in REFUSED}
    tint = tint_check(texts)
    for ext, (ours, tints) in REFUSED.items():
        with pytest.raises(WgslTypeError) as err:
            parse(texts[ext], "x.wgsl")
        assert (err.value.line, err.value.column) == (1, 8)
        assert ours in err.value.message
        assert tints in tint[ext]


@pytest.mark.parametrize("implementation", ["wgpu-native", "dawn"])
def test_kvdsl_check_passes_them(implementation, tmp_path):
    files = []
    for name, text in {
        "stages": _extension_kernel(", ".join(STAGE_EXTENSIONS)),
        "unnamed": _declared("rgb10a2unorm", "read"),
    }.items():
        files.append(tmp_path / f"{name}.wgsl")
        files[-1].write_text(text)
    env = dict(os.environ, WGPU_BACKEND_TYPE="Null") if implementation == "dawn" else None
    out = subprocess.run(
        [sys.executable, "-m", "kvdsl", "--webgpu", implementation, "check", *map(str, files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0 and out.stdout.endswith("2 passed, 0 failed\n"), out.stdout
