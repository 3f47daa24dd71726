"""IR building blocks, one module per axis value: index math and layouts (:mod:`.index`,
:mod:`.window`), walks (:mod:`.walks`), formats (:mod:`.formats`, :mod:`.words`,
:mod:`.quant`), rotary (:mod:`.rotary`) and RMSNorm (:mod:`.rmsnorm`). A node takes the values it needs, never a config.
"""
