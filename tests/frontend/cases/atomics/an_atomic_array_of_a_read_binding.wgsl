// expect: type error "holds an atomic, and the binding is read"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read> c: array<atomic<u32>, 4>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
// {body}
  out[gid.x] = atomicLoad(&c[0]);
