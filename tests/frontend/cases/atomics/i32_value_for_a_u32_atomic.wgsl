// expect: refused "atomicAdd of an atomic<u32> takes u32 values, got i32"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
// {body}
  atomicAdd(&c[0], 1i);
