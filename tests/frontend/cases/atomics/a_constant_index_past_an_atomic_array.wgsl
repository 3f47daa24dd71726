// expect: type error "the constant index 4 is out of range"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> c: array<atomic<u32>, 4>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
// {body}
  out[gid.x] = atomicAdd(&c[4], 1u);
