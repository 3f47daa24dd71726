// expect: type error "WGSL's atomics are atomic<u32> and atomic<i32>"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> c: array<atomic<f32>, 4>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
// {body}
  out[gid.x] = atomicLoad(&c[0]);
