// expect: refused "the first argument of atomicAdd is a pointer to an atomic"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
// {body}
  atomicAdd(c[0], 1u);
