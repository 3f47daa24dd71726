// expect: refused "expects (vec4<i32>)"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[1u] = pack4xI8(vec4<u32>(1u));
