// expect: type error "read and written only through the atomic builtins"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> c: array<atomic<u32>, 4>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
// {body}
  out[gid.x] = c[0];
