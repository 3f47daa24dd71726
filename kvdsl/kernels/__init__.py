"""The modes: one module per mode, each with a frozen, typed config validated at construction, and
a function from config to ``Kernel``.

:mod:`~kvdsl.kernels.config` holds the enums (``Walk``, ``Element``, ``RowLayout``,
``Reduction``, ``Bits``, the regions) and the bases (``KernelConfig`` for every mode's
``workgroup_size`` and ``fold``, ``CacheConfig`` for the cache shape; in
:mod:`~kvdsl.kernels.rows` ``Transforms``, the K transforms of every writer, and ``RowConfig``
for the modes of the row program), each field's check written once. Text from a host
(``--vars`` JSON, ``from_dict``) becomes enum members at the edge. A ``ConfigError`` names the
field, the value and what is allowed.
:mod:`~kvdsl.kernels.plan` makes the walk decisions from a whole config (which walk, pairs or
not, the workgroup size, the whole-rows workgroup rule), so the nodes never see a config.
:mod:`~kvdsl.kernels.extents` writes the host-side arithmetic of a kernel's contract (its
bindings' least sizes and its requirements over the params).
Programs that declare the same things before their walk share a frame that declares them once:
:class:`~kvdsl.kernels.dense.DenseRows` for the dense quantising writers (``dense_append``,
``dense_build``, ``dense_window_shift``'s appending regions, ``dense_convert``) and
:class:`~kvdsl.kernels.merge.MovedRows` for the passes that move past and new rows (``merge``,
``merge_share``, ``window_shift``), and :mod:`~kvdsl.kernels.qkv_frame` for the fused QKV
kernels (:mod:`~kvdsl.kernels.qkv`'s f32 and f16 walk, :mod:`~kvdsl.kernels.qkv_dense`'s
quantising one, into a buffer-sharing cache or :mod:`~kvdsl.kernels.qkv_paged`'s pages).
No module here imports one that imports it, inside a function or not: a shared part sits in a
module below both users.

The paged modes share :mod:`~kvdsl.kernels.paged` (their configs: page geometry, the rows'
format, addressing; pool bindings and sizes; ``index.json``'s ``pages``) and have a module each:
:mod:`~kvdsl.kernels.paged_append`, :mod:`~kvdsl.kernels.paged_read`, and
:mod:`~kvdsl.kernels.paged_pages` for the whole-page kernels (copy, compaction, the window's
page-table update).
:mod:`~kvdsl.kernels.attend` reads the caches back (split-K decode attention and the merge of its
partials, the merge its own mode, ``attend_merge``). The named points of every mode are in
:mod:`kvdsl.catalog`.

Drop-in configs keep the legacy template's binding names, host types, params fields and
dispatch geometry, so a host that ran the template runs them unchanged. Flat configs change the
dispatch to one invocation per vector. A flat walk carries float16 data in u32 words, unpacked
and packed through the op table's ``unpack2x16float`` and ``pack2x16float``, so no flat variant
needs ``shader-f16``. Kernels are IR only: no module here writes WGSL text."""

# Every builder's module, imported with the package: each registers its modes' builders
# (kvdsl.kernels.config.builds), so BUILDERS holds every mode wherever it is read.
from kvdsl.kernels import attend, build, copy, dense, dense_convert, dense_modes  # noqa: F401
from kvdsl.kernels import kivi, merge, merge_share, paged_append, paged_pages  # noqa: F401
from kvdsl.kernels import paged_read, qkv, quant, transpose, window_shift  # noqa: F401
