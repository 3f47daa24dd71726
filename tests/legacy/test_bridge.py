"""The legacy bridge, variable by variable: each mode's config stated by hand, each refusal's
message, and the interface of the kernel it picks against the template's (tests/legacy.py), for
the whole option matrix, without a GPU.

Shapes use distinct numbers (3 heads, 16 dims, workgroups of 128, a fold of 7) so that a field
read from the wrong variable shows.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.ir import workgroups
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.merge import MergeConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig
from kvdsl.kernels.transpose import TransposeConfig
from kvdsl.kernels.window_shift import WindowShiftConfig
from kvdsl.legacy import BRIDGES, KNOWN, Vars, binding_note, config_from_vars, mode_of
from tests.helpers.paths import ROOT
from tests.helpers.legacy import (
    PARAM_FIELDS,
    host_interface,
    legacy_bindings,
    legacy_params_struct,
    legacy_vars,
    legacy_workgroups,
)

SHAPE = dict(kv_heads=3, head_dim=16, workgroup_size=128, fold=7)
FIELDS = dict(kv_heads=3, head_dim=16, workgroup_size=128, fold=7)


def lv(mode: str, **opts):
    return legacy_vars(mode, **(SHAPE | opts))


def refused(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_vars(data)
    assert str(err.value) == message


# ---- each mode's config -------------------------------------------------------------------------


def test_transpose():
    assert config_from_vars(lv("transpose")) == TransposeConfig(**FIELDS)
    assert config_from_vars(lv("transpose", vec4=True, present_type="f16")) == TransposeConfig(
        **FIELDS, vec4=True, present_type="f16"
    )
    assert config_from_vars(lv("transpose", input_type="f16", present_type="f32")) == (
        TransposeConfig(**FIELDS, input_type="f16", present_type="f32")
    )
    # presentScalar defaults to inputScalar, then f32; the input to f32.
    v = lv("transpose", input_type="f16", present_type="f16")
    del v["presentScalar"]
    assert config_from_vars(v) == TransposeConfig(**FIELDS, input_type="f16", present_type="f16")
    del v["inputScalar"], v["presentElement"]
    assert config_from_vars(v) == TransposeConfig(**FIELDS)


def test_transpose_vec4_reads_head_dim_in_vec4s():
    v = lv("transpose", vec4=True)
    del v["headDim"]
    assert config_from_vars(v) == TransposeConfig(**FIELDS, vec4=True)
    v = lv("transpose")
    del v["headDim"]
    refused(v, "headDim=None: expected a value: the scalar transpose reads it")


def test_transpose_contradictions():
    refused(lv("transpose") | {"kvHidden": 40}, "kvHidden=40: expected 48 (kvNumHeads * headDim)")
    refused(
        lv("transpose") | {"presentElement": "f16"},
        "presentElement='f16': expected 'f32' (presentScalar)",
    )
    vec4 = lv("transpose", vec4=True)
    refused(vec4 | {"headDimV4": 5}, "headDimV4=5: expected 4 (headDim / 4)")
    refused(vec4 | {"kvHiddenV4": 48}, "kvHiddenV4=48: expected 12 (kvNumHeads * headDim / 4)")
    refused(
        vec4 | {"presentElement": "f32"},
        "presentElement='f32': expected 'vec4<f32>' (vec4 of presentScalar)",
    )
    # The vec4 walk does not read the scalar sizes, nor the scalar walk the vec4 ones.
    assert config_from_vars(vec4 | {"kvHidden": 1}).vec4
    assert not config_from_vars(lv("transpose") | {"kvHiddenV4": 1, "headDimV4": 1}).vec4


def test_copy():
    assert config_from_vars(lv("copy")) == CopyConfig(
        head_dim=16, workgroup_size=128, fold=7, walk="cooperative"
    )
    assert config_from_vars(lv("copy", vendor="apple", present_type="u32")) == CopyConfig(
        head_dim=16, workgroup_size=128, fold=7, walk="per_row", present_type="u32"
    )
    v = lv("copy")
    del v["device"]
    assert config_from_vars(v).walk == "cooperative"
    v = lv("copy") | {"device": {"adapterInfo": "apple"}}
    assert config_from_vars(v).walk == "cooperative"


def test_a_row_past_one_binding_is_refused_in_every_mode():
    """A copy row of 2^26 values (256 MiB of f32; ``row * HEAD_DIM`` wraps u32 from row 64 on)
    is refused as every other mode refuses ``kv_heads * head_dim`` past one binding, naming the
    variable, its value and the limit; 2^25 values (128 MiB) is taken."""
    limit = (
        "expected at most 33554432 (one row must fit WebGPU's default "
        "max-storage-buffer-binding-size of 128 MiB)"
    )
    refused(lv("copy") | {"headDim": 2**26}, f"headDim=67108864: {limit}")
    assert config_from_vars(lv("copy") | {"headDim": 2**25}).head_dim == 2**25
    with pytest.raises(ConfigError, match=re.escape(f"head_dim=67108864: {limit}")):
        CopyConfig(head_dim=2**26)
    for mode in ("merge", "build"):
        token_row = "kvHeads * headDim=67108864: expected at most 33554432 (one token's row"
        with pytest.raises(ConfigError, match=re.escape(token_row)):
            config_from_vars(lv(mode) | {"kvHeads": 1, "headDim": 2**26})


def test_merge():
    assert config_from_vars(lv("merge")) == MergeConfig(**FIELDS, walk="cooperative")
    assert config_from_vars(lv("merge", vendor="apple", present_type="f16")) == MergeConfig(
        **FIELDS, walk="per_row", present_type="f16", input_type="f16"
    )


def test_merge_share():
    assert config_from_vars(lv("merge_share")) == MergeShareConfig(
        **FIELDS, region="retain", walk="cooperative"
    )
    assert config_from_vars(lv("merge_share", vendor="apple")) == MergeShareConfig(
        **FIELDS, region="retain", walk="per_row"
    )
    assert config_from_vars(lv("merge_share", share_region="append", vendor="apple")) == (
        MergeShareConfig(**FIELDS, region="append", walk="hybrid")
    )
    append = lv("merge_share", share_region="append", rotary=True, present_type="f16")
    assert config_from_vars(append) == MergeShareConfig(
        **FIELDS,
        region="append",
        walk="cooperative",
        rotary=True,
        present_type="f16",
        input_type="f16",
    )
    # Partial rotary: the first 2 * half dimensions rotate (half = headDim / 2: the whole head).
    assert config_from_vars(append | {"half": 4}).rotary_half == 4
    assert config_from_vars(append | {"half": 8}).rotary_half is None
    refused(append | {"half": 9}, "half=9: " + HALF_ALLOWED)
    # The retain pass neither rotates nor declares HALF.
    retain = lv("merge_share", rotary=True) | {"half": 4}
    assert config_from_vars(retain).rotary is False
    assert config_from_vars(lv("merge_share") | {"shareRegion": "other"}).region == "retain"


HALF_ALLOWED = (
    "expected a whole number from 1 to headDim / 2 = 8 (the rotated pairs of a head: its first "
    "2 * half dimensions rotate, the rest pass through)"
)


def test_window_shift():
    assert config_from_vars(lv("window_shift")) == WindowShiftConfig(**FIELDS, region="all")
    v = lv("window_shift")
    del v["shiftRegion"]
    assert config_from_vars(v).region == "all"
    assert config_from_vars(lv("window_shift", shift_region="shift", rotary=True)) == (
        WindowShiftConfig(**FIELDS, region="shift", rotary=False)
    )
    append = lv("window_shift", shift_region="append", rotary=True, present_type="f16")
    assert config_from_vars(append) == WindowShiftConfig(
        **FIELDS, region="append", rotary=True, present_type="f16", input_type="f16"
    )
    assert config_from_vars(append | {"half": 7}).rotary_half == 7
    refused(append | {"half": 0}, "half=0: " + HALF_ALLOWED)
    assert config_from_vars(lv("window_shift", shift_region="shift") | {"half": 70})
    # Fixed meanings: 'append' without hasRotary is the unrotated append (the template does not
    # compile there); 'all' with hasRotary rotates appended K (the template leaves it unrotated).
    assert config_from_vars(lv("window_shift", shift_region="append")) == WindowShiftConfig(
        **FIELDS, region="append", rotary=False
    )
    assert config_from_vars(lv("window_shift", rotary=True) | {"half": 3}) == WindowShiftConfig(
        **FIELDS, region="all", rotary=True, rotary_half=3
    )
    refused(
        lv("window_shift") | {"shiftRegion": "tail"},
        "shiftRegion='tail': expected all, shift or append",
    )
    refused(
        lv("window_shift") | {"zeroScalar": "f16"},
        "zeroScalar='f16': expected 'f32' (presentScalar: the cleared rows' element type)",
    )


def test_build():
    assert config_from_vars(lv("build")) == BuildConfig(**FIELDS)
    assert config_from_vars(lv("build", k_norm=True, eps=0.5, rotary=True)) == BuildConfig(
        **FIELDS, k_norm=True, eps=0.5, rotary=True
    )
    assert config_from_vars(lv("build", present_type="f16")) == BuildConfig(
        **FIELDS, present_type="f16", input_type="f32"
    )
    v = lv("build", k_norm=True) | {"qkEps": 2}
    cfg = config_from_vars(v)
    assert cfg.eps == 2.0 and isinstance(cfg.eps, float)
    # Without hasKNorm, qkEps is not read.
    assert config_from_vars(lv("build") | {"qkEps": -1}).k_norm is False
    refused(lv("build", rotary=True) | {"half": 9}, "half=9: " + HALF_ALLOWED)
    refused(lv("build", rotary=True) | {"half": 2.5}, "half=2.5: " + HALF_ALLOWED)
    assert config_from_vars(lv("build", rotary=True) | {"half": 5}) == BuildConfig(
        **FIELDS, rotary=True, rotary_half=5
    )


@pytest.mark.parametrize(
    "text, eps",
    [
        ("1e-06", 1e-06),
        ("1e-6", 1e-06),
        ("1e-6f", 1e-06),
        ("0.000001", 1e-06),
        (" 1e-6 ", 1e-06),  # pasted, the blanks are WGSL whitespace
        ("1.0e-5", 1e-05),
        ("0.01", 0.01),
        ("1", 1.0),  # an abstract int: `const QK_EPS: f32 = 1;` compiles
        ("2f", 2.0),
        ("5.", 5.0),
        (".5", 0.5),
        ("0x10", 16.0),
        ("0x1p-20", 2.0**-20),
        ("0x1p-20f", 2.0**-20),
        ("0x1.8p-3", 0.1875),
        ("0x1.8f", 1 + 0x8F / 256),  # no exponent: f is a hex digit
        ("16777217", 16777216.0),  # rounded to f32, nearest
        # More digits than f32 holds: the f32 nearest (here 1e-6's neighbour above).
        ("1.0000000596046448e-6f", float(np.nextafter(np.float32(1e-6), np.float32(1)))),
    ],
)
def test_k_norm_eps_takes_its_wgsl_text(text, eps):
    """The template pastes qkEps into `const QK_EPS: f32 = {{ qkEps }};`: the text of a WGSL
    literal is the f32 it spells (``eps`` here), given as that f32's shortest decimal."""
    cfg = config_from_vars(lv("build", k_norm=True) | {"qkEps": text})
    assert np.float32(cfg.eps) == eps and type(cfg.eps) is float
    assert cfg.eps == float(np.format_float_scientific(np.float32(eps), unique=True))


def test_k_norm_eps_number_and_text_make_the_same_config():
    for same in (1e-06, "1e-06", "1e-6f", "0.000001", "1.00000001e-6"):
        cfg = config_from_vars(lv("append_quant", k_norm=True) | {"qkEps": same})
        assert cfg == config_from_vars(lv("append_quant", k_norm=True) | {"qkEps": 1e-06})
    # A number with more digits than f32 keeps its f32's shortest decimal, as the kernel does.
    assert config_from_vars(lv("build", k_norm=True) | {"qkEps": 0.1}).eps == 0.1
    cfg = config_from_vars(lv("build", k_norm=True) | {"qkEps": 1.2345678901e-6})
    assert cfg.eps == 1.2345679e-06


def test_f_suffixed_text_rounds_straight_to_f32():
    """An `f` literal rounds once, to f32; without `f` it is an f64 first (as WGSL says)."""
    # Just above the midpoint of 1 and the f32 above it, by less than an f64 ulp: as an f64 it
    # is the midpoint (a tie, to even: 1), straight to f32 it is above it.
    text = "1.00000005960464477539062500000001"
    above = np.nextafter(np.float32(1), np.float32(2))
    assert (
        np.float32(config_from_vars(lv("build", k_norm=True) | {"qkEps": text + "f"}).eps) == above
    )
    assert config_from_vars(lv("build", k_norm=True) | {"qkEps": text}).eps == 1.0


EPS_ALLOWED = (
    "a positive number, or the text of a WGSL literal for one ('1e-6', '1e-6f', '0.01', '1', "
    "'0x1p-20'): the template pastes it into its f32 const QK_EPS"
)
EPS_POSITIVE = (
    "a number above 0, given as a number or as the text of a WGSL literal ('1e-6', '1e-6f', "
    "'0.01', '1', '0x1p-20')"
)
F16 = "an f32 literal, not an f16 one (suffix h): QK_EPS is an f32 const"
NORMAL = "a number whose f32 is normal (1.2e-38 .. 3.4e+38): in f32 it is "


@pytest.mark.parametrize(
    "eps, allowed",
    [
        (0, EPS_POSITIVE),
        (-0.5, EPS_POSITIVE),
        ("-1e-6", EPS_POSITIVE),
        ("0.0", "a number above 0: in f32 it is 0"),
        ("1e-50", "a number above 0: in f32 it is 0"),
        (True, EPS_ALLOWED),
        ([1e-6], EPS_ALLOWED),
        ({"v": 1e-6}, EPS_ALLOWED),
        (float("nan"), EPS_ALLOWED),
        ("tiny", EPS_ALLOWED),
        ("nan", EPS_ALLOWED),
        ("inf", EPS_ALLOWED),
        ("", EPS_ALLOWED),
        ("+1e-6", EPS_ALLOWED),
        ("01", EPS_ALLOWED),
        ("1i", EPS_ALLOWED),
        ("1u", EPS_ALLOWED),
        ("1e", EPS_ALLOWED),
        ("0xp1", EPS_ALLOWED),
        ("1e-6 // eps", EPS_ALLOWED),
        ("1e-6h", F16),
        ("0x1p-3h", F16),
        (
            "9223372036854775808",
            "an integer literal below 2^63 (WGSL's abstract integers are 64-bit)",
        ),
        (2**63, "a number below 2^63 (WGSL's abstract integers are 64-bit)"),
        ("1e39", NORMAL + "inf"),
        ("1e39f", NORMAL + "inf"),
        ("1e999999999", NORMAL + "inf"),
        (float("inf"), NORMAL + "inf"),
        ("1.5e-45f", NORMAL + "1.401298464324817e-45"),  # a subnormal
    ],
)
def test_k_norm_eps_refusals(eps, allowed):
    refused(lv("build", k_norm=True) | {"qkEps": eps}, f"qkEps={eps!r}: expected {allowed}")


def test_k_norm_eps_missing():
    v = lv("build", k_norm=True)
    del v["qkEps"]
    refused(v, "qkEps=None: expected a value: the template reads it for this mode")


def test_quant_modes():
    assert config_from_vars(lv("build_quant")) == BuildQuantConfig(**FIELDS, bits=8)
    assert config_from_vars(lv("append_quant", bits=4, k_norm=True, eps=0.25)) == (
        AppendQuantConfig(**FIELDS, bits=4, k_norm=True, eps=0.25)
    )
    assert config_from_vars(lv("build_quant", bits=4, rotary=True)) == BuildQuantConfig(
        **FIELDS, bits=4, rotary=True
    )
    assert config_from_vars(lv("append_quant", qmin=-100, qmax=100)) == AppendQuantConfig(
        **FIELDS, qmin=-100, qmax=100
    )
    cfg = config_from_vars(lv("build_quant") | {"qmin": -64.0, "qmax": 63.0})
    assert (cfg.qmin, cfg.qmax) == (-64, 63) and isinstance(cfg.qmin, int)
    v = lv("build_quant")
    del v["qmin"], v["qmax"]
    assert (config_from_vars(v).qmin, config_from_vars(v).qmax) == (-128, 127)


@pytest.mark.parametrize(
    "mode,k_norm,rotary,template",
    [
        ("build_quant", False, True, 8),
        ("build_quant", True, True, 9),
        ("append_quant", False, True, 9),
        ("append_quant", True, True, 10),
        ("append_quant", True, False, 8),
    ],
)
def test_quant_bindings_follow_the_stated_device_limit(mode, k_norm, rotary, template):
    """The template's bindings wherever the device allows them (WebGPU's 8 unless stated),
    else the packed ones; a note says so only where they differ from the template's."""
    v = lv(mode, k_norm=k_norm, rotary=rotary)
    for most in (None, 8, 9, 10, 64):
        cfg = config_from_vars(v, most)
        fits = template <= (most or 8)
        assert cfg.bindings == ("template" if fits else "packed"), most
        note = binding_note(cfg)
        if fits:
            assert note is None
        else:
            assert f"the template's drop-in binds {template}: " in note
            assert note.endswith(f"pass --max-storage-buffers {template} (or more)")


@pytest.mark.parametrize("most", [7, 0, -8, 8.0, True, "10"])
def test_stated_storage_buffers_refusals(most):
    refused_with = (
        f"max_storage_buffers={most!r}: expected a whole number, 8 or more: the device's "
        "maxStorageBuffersPerShaderStage (WebGPU guarantees 8)"
    )
    with pytest.raises(ConfigError) as err:
        config_from_vars(lv("build_quant", k_norm=True, rotary=True), most)
    assert str(err.value) == refused_with


def test_quant_refusals():
    refused(lv("build_quant") | {"bits": 5}, "bits=5: expected 8 or 4 (the template takes any other value as 4)")  # fmt: skip
    refused(lv("build_quant") | {"bits": 9}, "bits=9: expected 8 or 4 (the template takes any other value as 4)")  # fmt: skip
    refused(lv("build_quant") | {"bits": 8.0}, "bits=8.0: expected an integer")
    refused(lv("build_quant") | {"bits": True}, "bits=True: expected an integer")
    refused(
        lv("build_quant") | {"packed": 8},
        "packed=8: expected 16 (headDim words for 8 bits, headDim / 2 for 4)",
    )
    refused(
        lv("append_quant", bits=4) | {"packed": 16},
        "packed=16: expected 8 (headDim words for 8 bits, headDim / 2 for 4)",
    )
    for name in ("qmin", "qmax"):
        for bad in (1.5, True, "3"):
            refused(
                lv("build_quant") | {name: bad},
                f"{name}={bad!r}: expected an integer value (the template prints it as an f32 const)",
            )
    v = lv("append_quant")
    del v["bits"]
    refused(v, "bits=None: expected a value: the template reads it for this mode")


# ---- reading variables --------------------------------------------------------------------------


def test_unknown_variables_are_named():
    known = ", ".join(sorted(KNOWN - {"env"}))
    refused(
        lv("copy") | {"zzz": 1, "aaa": 2},
        f"aaa=2: expected a variable the template reads: {known}",
    )
    assert "env" in KNOWN and "env" not in known
    assert config_from_vars(lv("copy") | {"env": {"wgsl": {}}}) == config_from_vars(lv("copy"))


def test_mode_of():
    assert mode_of(Vars({})) == "transpose"
    assert mode_of(Vars({"mode": "copy"})) == "copy"
    assert mode_of(Vars({"mode": "copy", "modeSpec": "merge"})) == "merge"
    assert mode_of(Vars({"mode": "", "modeSpec": None})) == "transpose"
    with pytest.raises(ConfigError) as err:
        mode_of(Vars({"modeSpec": "paint"}))
    assert str(err.value) == "mode='paint': expected one of " + ", ".join(sorted(BRIDGES))
    assert sorted(BRIDGES) == [
        "append_quant",
        "build",
        "build_quant",
        "copy",
        "merge",
        "merge_share",
        "transpose",
        "window_shift",
    ]


def test_vars_get_and_need():
    v = Vars({"device": {"adapterInfo": {"vendor": "apple"}}, "headDim": 8, "hasRotary": 1})
    assert v.get("device.adapterInfo.vendor") == "apple"
    assert v.get("device.adapterInfo.missing", "d") == "d"
    assert v.get("headDim.deeper", 5) == 5
    assert v.get("headDim", None, int) == 8
    assert v.get("hasRotary", False, bool) is True
    assert Vars({"hasRotary": 0}).get("hasRotary", True, bool) is False
    assert v.need("headDim", int) == 8
    for data, path, kind, message in [
        ({"headDim": True}, "headDim", int, "headDim=True: expected an integer"),
        ({"headDim": 8.0}, "headDim", int, "headDim=8.0: expected an integer"),
        ({"hasRotary": 2}, "hasRotary", bool, "hasRotary=2: expected true or false"),
        ({"hasRotary": "yes"}, "hasRotary", bool, "hasRotary='yes': expected true or false"),
        ({"mode": 3}, "mode", str, "mode=3: expected text"),
    ]:
        with pytest.raises(ConfigError) as err:
            Vars(data).get(path, None, kind)
        assert str(err.value) == message
    with pytest.raises(ConfigError) as err:
        Vars({}).need("kvHeads", int)
    assert str(err.value) == "kvHeads=None: expected a value: the template reads it for this mode"
    refused(
        lv("copy") | {"device": {"adapterInfo": {"vendor": 1}}},
        "device.adapterInfo.vendor=1: expected text",
    )


def test_agree():
    v = Vars({"half": 4})
    v.agree("half", 4, "x")
    v.agree("qkEps", 1, "absent: nothing to check")
    with pytest.raises(ConfigError) as err:
        v.agree("half", 8, "headDim / 2")
    assert str(err.value) == "half=4: expected 8 (headDim / 2)"


@pytest.mark.parametrize(
    "mode, missing",
    [
        ("transpose", "kvNumHeads"),
        ("transpose", "copyWorkgroupSize"),
        ("transpose", "DISPATCH_FOLD_WIDTH"),
        ("copy", "headDim"),
        ("copy", "tunables"),
        ("copy", "DISPATCH_FOLD_WIDTH"),
        ("merge", "kvHeads"),
        ("merge_share", "headDim"),
        ("window_shift", "tunables"),
        ("build", "DISPATCH_FOLD_WIDTH"),
        ("build_quant", "kvHeads"),
        ("append_quant", "headDim"),
    ],
)
def test_required_variables(mode, missing):
    v = lv(mode)
    del v[missing]
    name = "tunables.COPY_WORKGROUP_SIZE" if missing == "tunables" else missing
    refused(v, f"{name}=None: expected a value: the template reads it for this mode")


def test_config_errors_name_the_template_variable():
    """A refusal of the config a variable made names the variable, not the config's field."""
    with pytest.raises(ConfigError, match=r"^tunables\.COPY_WORKGROUP_SIZE=1024: "):
        config_from_vars(lv("merge", workgroup_size=1024))
    with pytest.raises(ConfigError, match=r"^copyWorkgroupSize=1024: "):
        config_from_vars(lv("transpose", workgroup_size=1024))
    with pytest.raises(ConfigError, match=r"^DISPATCH_FOLD_WIDTH=70000: .*<= 65535"):
        config_from_vars(lv("merge", fold=70000))
    with pytest.raises(ConfigError, match=r"^kvHeads=-1: expected a positive integer"):
        config_from_vars(lv("merge") | {"kvHeads": -1})


# ---- the template's interface -------------------------------------------------------------------


def matrix():
    for vec4, pt in itertools.product((False, True), ("f32", "f16")):
        yield "transpose", dict(vec4=vec4, present_type=pt)
    for vendor, pt in itertools.product(("nvidia", "apple"), ("f32", "f16", "u32", "i32")):
        yield "copy", dict(vendor=vendor, present_type=pt)
    for vendor, pt in itertools.product(("nvidia", "apple"), ("f32", "f16")):
        yield "merge", dict(vendor=vendor, present_type=pt)
    for vendor, region, rotary in itertools.product(
        ("nvidia", "apple"), ("retain", "append"), (False, True)
    ):
        yield "merge_share", dict(vendor=vendor, share_region=region, rotary=rotary)
    for region, rotary in itertools.product(("all", "shift", "append"), (False, True)):
        yield "window_shift", dict(shift_region=region, rotary=rotary)
    for k_norm, rotary in itertools.product((False, True), (False, True)):
        yield "build", dict(k_norm=k_norm, rotary=rotary)
    for mode, bits, k_norm in itertools.product(("build_quant", "append_quant"), (8, 4), (0, 1)):
        yield mode, dict(bits=bits, k_norm=bool(k_norm))


MATRIX = [(mode, opts) for mode, opts in matrix()]


@pytest.mark.parametrize(
    "mode, opts", MATRIX, ids=["-".join([m] + [f"{v}" for v in o.values()]) for m, o in MATRIX]
)
def test_kernel_has_the_templates_interface(mode, opts):
    v = lv(mode, **opts)
    cfg = config_from_vars(v)
    assert cfg.mode == mode
    kernel = catalog.build_config(cfg)
    mine, template = host_interface(kernel.bindings), host_interface(legacy_bindings(v))
    fixed = {("all", True), ("append", False)}
    if mode == "window_shift" and (opts["shift_region"], opts["rotary"]) in fixed:
        # The two window_shift combinations whose meaning kvdsl fixes (docs/legacy.md): 'all'
        # with hasRotary rotates appended K, so it reads a rotary table the template's does
        # not (one packed rotary_table: 8 storage buffers); 'append' without hasRotary does not
        # rotate, so it leaves out the tables the template's (which does not compile) declares.
        tables = {("cos_cache", "read", "f32"), ("sin_cache", "read", "f32")}
        if opts["rotary"]:
            tables = {("rotary_table", "read", "f32")}
            assert binding_note(cfg).startswith("bindings differ from the template's: rotary_table")
        more, fewer = (mine, template) if opts["rotary"] else (template, mine)
        assert set(more) - set(fewer) == tables and set(fewer) <= set(more)
        assert [b for b in more if b not in tables] == list(fewer)
    else:
        assert mine == template
    fields = tuple(name for name, _ in kernel.params.fields)
    assert fields == tuple(name for name, _ in legacy_params_struct(v).fields)
    for params in (
        {"batchSize": 2, "kvSeq": 5, "count": 5},
        {"batchSize": 3, "kvSeq": 700, "count": 6000},
    ):
        p = {k: params[k] for k in PARAM_FIELDS[mode] if k in params}
        p |= {k: 4 for k in PARAM_FIELDS[mode] if k not in p}
        assert workgroups(kernel, p) == legacy_workgroups(v, p), p


@pytest.mark.parametrize(
    "name", ["kvHeads", "headDim", "DISPATCH_FOLD_WIDTH", "tunables.COPY_WORKGROUP_SIZE"]
)
@pytest.mark.parametrize("mode", ["merge", "build_quant"])
def test_shape_variables_are_integers(mode, name):
    v = lv(mode)
    if name.startswith("tunables."):
        v["tunables"] = {"COPY_WORKGROUP_SIZE": "128"}
    else:
        v[name] = "16"
    refused(v, f"{name}='{'128' if name.startswith('tunables.') else '16'}': expected an integer")


@pytest.mark.parametrize("mode", ["build", "build_quant", "append_quant", "merge_share"])
def test_rotary_and_k_norm_default_off(mode):
    v = lv(mode, share_region="append") if mode == "merge_share" else lv(mode)
    del v["hasRotary"], v["hasKNorm"]
    cfg = config_from_vars(v)
    assert cfg.rotary is False
    assert getattr(cfg, "k_norm", False) is False


@pytest.mark.parametrize("name", ["hasRotary", "hasKNorm"])
def test_flags_are_true_or_false(name):
    refused(lv("build") | {name: 2}, f"{name}=2: expected true or false")
    refused(lv("build") | {name: "yes"}, f"{name}='yes': expected true or false")
    assert config_from_vars(lv("build") | {"hasKNorm": 1}).k_norm is True


def test_bridge_registers_the_mode(monkeypatch):
    from kvdsl import legacy

    monkeypatch.setattr(legacy, "BRIDGES", dict(legacy.BRIDGES))

    def make(v):
        return CopyConfig(8)

    assert legacy._bridge("planted")(make) is make
    assert legacy.BRIDGES["planted"] is make
    assert legacy.config_from_vars({"mode": "planted"}) == CopyConfig(8)


def test_window_shift_append_checks_head_dim_before_halving_it():
    # The append region reads half = headDim / 2 before the shape variables are read.
    v = lv("window_shift", shift_region="append", rotary=True) | {"headDim": "16"}
    refused(v, "headDim='16': expected an integer")


# ---- every refusal in words ---------------------------------------------------------------------

#: A Python type's name as a word ("int4" and "int8" are words of their own).
TYPE_NAME = re.compile(r"<class|\b(int|float|str|dict|bool|NoneType|list|tuple)\b")
#: Values of the wrong kind for some variable or other: numbers as text, booleans as numbers,
#: lists, objects, null, fractions, NaN and infinities (Python's JSON reads NaN and Infinity).
WRONG = [
    "16", "1e-6", "true", "", 1, 0, 2, -1, 16.5, 2**70, True, False, None, [16], [], {"x": 1},
    float("nan"), float("inf"), "f32", "apple",
]  # fmt: skip
#: Every variable the bridge reads, the nested ones and the objects that hold them.
PATHS = sorted(KNOWN - {"env"}) + [
    "device.adapterInfo",
    "device.adapterInfo.vendor",
    "tunables.COPY_WORKGROUP_SIZE",
]
#: Each mode with the options under which it reads the most variables.
READERS = [
    ("transpose", {}),
    ("transpose", {"vec4": True}),
    ("copy", {}),
    ("merge", {}),
    ("merge_share", {"share_region": "append", "rotary": True}),
    ("window_shift", {"shift_region": "append", "rotary": True}),
    ("window_shift", {}),
    ("build", {"k_norm": True, "rotary": True}),
    ("build_quant", {"k_norm": True}),
    ("append_quant", {"bits": 4}),
]


def with_value(data: dict, path: str, value) -> dict:
    """``data`` with the variable at dotted ``path`` set to ``value`` (objects made on the way)."""
    out = json.loads(json.dumps(data))
    node = out
    *parents, last = path.split(".")
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value
    return out


def test_every_refusal_is_one_line_in_words():
    """Each variable of each mode set to values of the wrong kind: the bridge takes it (where the
    template would read it as the same thing) or refuses it with a ConfigError naming the
    variable (or the config field it feeds) in one line, with what is allowed in words and no
    Python type name; never another exception."""
    refusals = 0
    for (mode, opts), path, value in itertools.product(READERS, PATHS, WRONG):
        data = with_value(lv(mode, **opts), path, value)
        try:
            config_from_vars(data)
        except ConfigError as err:
            refusals += 1
            message = str(err)
            assert "\n" not in message, (mode, path, value, message)
            assert ": expected " in message, (mode, path, value, message)
            assert not TYPE_NAME.search(message.partition(": expected ")[2]), (
                mode, path, value, message,
            )  # fmt: skip
            assert not TYPE_NAME.search(message.partition("=")[0]), message
    assert refusals > 1000


@pytest.mark.parametrize(
    "mode, change, message",
    [
        (
            "build",
            {"qkEps": "tiny"},
            "qkEps='tiny': expected a positive number, or the text of a WGSL",
        ),
        ("build", {"qkEps": "-1e-6"}, "qkEps='-1e-6': expected a number above 0"),
        ("build", {"headDim": "16"}, "headDim='16': expected an integer"),
        ("build", {"hasRotary": [1]}, "hasRotary=[1]: expected true or false"),
        ("build", {"mode": ["build"]}, "mode=['build']: expected one of append_quant"),
        (
            "merge",
            {"device": {"adapterInfo": {"vendor": 1}}},
            "device.adapterInfo.vendor=1: expected text",
        ),
    ],
)
def test_cli_refuses_wrong_kinds_in_one_line(mode, change, message):
    data = lv(mode, k_norm=True) | change
    out = subprocess.run(
        [sys.executable, "-m", "kvdsl", "legacy", "--vars", json.dumps(data)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("kvdsl legacy: " + message)
    assert not TYPE_NAME.search(out.stderr), out.stderr


def test_cli_prints_the_kernel_for_qk_eps_text():
    data = lv("build", k_norm=True) | {"qkEps": "1e-6f"}
    out = subprocess.run(
        [sys.executable, "-m", "kvdsl", "legacy", "--vars", json.dumps(data)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "const QK_EPS: f32 = 1e-06f;" in out.stdout
    number = lv("build", k_norm=True) | {"qkEps": 1e-06}
    assert out.stdout == subprocess.run(
        [sys.executable, "-m", "kvdsl", "legacy", "--vars", json.dumps(number)],
        cwd=ROOT, capture_output=True, text=True,
    ).stdout  # fmt: skip
