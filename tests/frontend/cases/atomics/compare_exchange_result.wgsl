// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
// {body}
  let r = atomicCompareExchangeWeak(&c[0], 1u, 2u);
  out[1u] = select(0u, r.old_value, r.exchanged);
  out[2u] = atomicCompareExchangeWeak(&c[1], 0u, 5u).old_value;
