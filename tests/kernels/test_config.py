"""kvdsl.kernels.config: typed fields, their conversion at the edge and the published key order."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest

from kvdsl import catalog
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.config import (
    Bits,
    ConfigError,
    Element,
    Reduction,
    ShareRegion,
    Slot,
    BUILDERS,
    KernelConfig,
    Walk,
    as_dict,
    builds,
    from_dict,
)
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig


def _config_classes(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_config_classes(sub))]


def test_every_mode_registers_its_builder_beside_it():
    """Each config class that names a mode has that mode's builder, registered once where the
    builder is defined (``@builds``), and the catalog's modes are that table; a mode registered
    again is refused."""
    named = {c for c in _config_classes(KernelConfig) if "mode" in vars(c)}
    assert {c.mode for c in named} == set(BUILDERS) and catalog.MODES is BUILDERS
    for cls in named:
        registered, builder = BUILDERS[cls.mode]
        assert registered is cls and inspect.getmodule(builder).__name__.startswith("kvdsl.kernels")
        assert builder(next(c for c in catalog.VARIANTS.values() if type(c) is cls)).name
    with pytest.raises(ValueError, match="mode 'copy' has a builder already"):
        builds(CopyConfig)(lambda cfg, name="copy": None)
    assert BUILDERS["copy"][0] is CopyConfig


@pytest.mark.parametrize("mode", sorted(catalog.MODES))
def test_keys_name_every_field_once(mode):
    """``KEYS`` (the order of as_dict, index.json and the emitted headers) lists each field of
    the dataclass once, in its order, the schedule's fields (``workgroup_size``, ``fold``,
    ``window``) last; a variant's ``as_dict`` leaves ``window`` out where it is unset."""
    cls, _ = catalog.MODES[mode]
    fields = [f.name for f in dataclasses.fields(cls)]
    schedule = ["workgroup_size", "fold", "window"]
    assert list(cls.KEYS) == [f for f in fields if f not in schedule] + schedule
    for cfg in (c for c in catalog.VARIANTS.values() if type(c) is cls and not c.window):
        unset = {f.name for f in dataclasses.fields(cls) if f.metadata and not getattr(cfg, f.name)}
        assert "window" in unset and list(as_dict(cfg))[1:] == [
            k for k in cls.KEYS if k not in unset
        ]


@pytest.mark.parametrize("mode", sorted(catalog.MODES))
def test_each_field_declaration_states_its_check(mode):
    """A choice field given a value its enum does not name, and a field whose default is a bool
    given 1, are refused naming the field, the value and what is allowed, in every mode."""
    cls, _ = catalog.MODES[mode]
    base = next(c for c in catalog.VARIANTS.values() if type(c) is cls)
    given = {f.name: getattr(base, f.name) for f in dataclasses.fields(cls)}
    checked = 0
    for f in dataclasses.fields(cls):
        slot = inspect.getattr_static(cls, f.name, None)
        if isinstance(slot, Slot) and slot.allowed is not None:
            wrong, words = "nope", "expected one of "
        elif type(f.default) is bool:
            wrong, words = 1, "expected true or false"
        else:
            continue
        with pytest.raises(ConfigError, match=f"^{f.name}=.*: {words}") as err:
            cls(**given | {f.name: wrong})
        assert err.value.field == f.name and err.value.value == wrong
        checked += 1
    assert checked >= 1


def test_window_is_printed_where_set():
    plain = as_dict(BuildConfig(2, 16, walk=Walk.FLAT))
    windowed = as_dict(BuildConfig(2, 16, walk=Walk.FLAT, window=True))
    assert "window" not in plain and windowed == plain | {"window": True}
    assert list(windowed)[-1] == "window"
    assert from_dict(BuildConfig, {"kv_heads": 2, "head_dim": 16, "walk": "flat", "window": True})
    for bad, allowed in ((1, "true or false"), ("yes", "true or false")):
        with pytest.raises(ConfigError, match=f"window={bad!r}: expected {allowed}"):
            BuildConfig(2, 16, walk=Walk.FLAT, window=bad)
    with pytest.raises(ConfigError, match="walk='per_row': expected 'flat' for window=True"):
        BuildConfig(2, 16, window=True)
    with pytest.raises(ConfigError, match="window=True: expected false for copy"):
        CopyConfig(head_dim=16, walk=Walk.FLAT, window=True)


def test_strings_become_members():
    cfg = from_dict(
        MergeShareConfig,
        {"kv_heads": 2, "head_dim": 16, "region": "retain", "walk": "flat", "present_type": "f16"},
    )
    assert cfg.region is ShareRegion.RETAIN and cfg.walk is Walk.FLAT
    assert cfg.present_type is Element.F16 and cfg.input_type is Element.F32
    quant = BuildQuantConfig(2, 16, 4)
    assert quant.bits is Bits.INT4
    replaced = dataclasses.replace(BuildConfig(2, 16, k_norm=True), reduction="subgroup")
    assert replaced.reduction is Reduction.SUBGROUP


def test_members_print_as_their_values():
    cfg = AppendQuantConfig(2, 16, bits=Bits.INT4, walk=Walk.FLAT)
    header = json.dumps(as_dict(cfg))
    assert header.startswith('{"mode": "append_quant", "kv_heads": 2, "head_dim": 16,')
    assert '"walk": "flat", "reduction": "workgroup"' in header
    assert '"bits": 4, "qmin": -8, "qmax": 7, "bindings": "template"' in header
    assert header.endswith('"rotary_position": "row", "workgroup_size": 256, "fold": 65535}')


def test_defaults_that_depend_on_other_fields():
    assert BuildConfig(2, 16).workgroup_size == 64
    assert BuildConfig(2, 16, walk=Walk.FLAT).workgroup_size == 256
    assert BuildConfig(2, 16, k_norm=True, walk=Walk.FLAT).workgroup_size == 128
    assert BuildConfig(2, 16, walk=Walk.FLAT, workgroup_size=32).workgroup_size == 32
    quant = BuildQuantConfig(2, 16, bits=Bits.INT4)
    assert (quant.qmin, quant.qmax) == (-8, 7)
    assert quant == BuildQuantConfig(2, 16, bits=4, qmin=-8, qmax=7, workgroup_size=64)


def test_a_string_that_names_no_member_is_rejected():
    with pytest.raises(ConfigError, match=r"walk='flat4': expected one of 'per_row', 'flat'"):
        BuildConfig(2, 16, walk="flat4")
    with pytest.raises(ConfigError, match=r"bits=True: expected one of 8, 4"):
        BuildQuantConfig(2, 16, bits=True)
