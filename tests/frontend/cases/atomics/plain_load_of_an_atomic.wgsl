// expect: refused "not as a plain value"
// tint: refused
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
// {body}
  out[gid.x] = c[gid.x];
