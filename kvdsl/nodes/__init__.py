"""IR building blocks: small functions that build IR into a ``KernelBuilder``, each tested alone on
the interpreter, one module per axis value.

:mod:`.index` (the dispatch-fold flat index and its guard, BSH/BNSH indexing), :mod:`.walks`
(per row, cooperative blocks, flat vectors, pairs, and their dispatch), :mod:`.words` (float16
carried in u32 words), :mod:`.rotary` (NeoX rotary, a ``Rotation`` value, whole or partial), :mod:`.rmsnorm` (the one
inverse RMS, ``Norm``), :mod:`.transforms` (K's RMSNorm and rotary on a quantiser's lane),
:mod:`.quant` (the template's host-scaled int8/int4: scales, quantisation and packing),
:mod:`.formats` (the quantised formats as values of one protocol, ``Format``: storage, in-kernel
quantiser and decoder stated from each format's parameters; row-scaled ``Symmetric`` and
``Asymmetric`` in ``scaled.py``, ggml's blocks in ``ggml.py``; docs/formats.md, "Formats as
values"), :mod:`.quantise` (the dense quantiser every mode that writes a
dense cache calls: ``quantise_rows`` with a ``Quantiser`` and a ``Destination`` hook giving the
row's place), :mod:`.window` (the append-window arithmetic) and :mod:`.paged` (the paged layout:
page geometry, slot-mapping and page-table addressing; docs/modes.md, "Paged caches").

A node takes the values it needs (a row length, a format, a layout), never a config, so it does
not depend on which mode calls it. A mode's program is written once for one vector of a row; the
walk decides which invocation runs it. A generic "row program × schedule" compiler was not
built: the modes differ enough (windows, eviction, quantised packing) that one small function
per mode composing shared nodes reads more simply than a schedule language."""
