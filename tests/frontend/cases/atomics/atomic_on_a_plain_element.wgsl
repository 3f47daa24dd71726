// expect: refused "the pointer is not to an atomic<u32> or atomic<i32>"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
// {body}
  atomicAdd(&out[0], 1u);
