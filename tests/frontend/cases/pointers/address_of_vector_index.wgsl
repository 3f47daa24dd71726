// expect: refused "the address of a vector component"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var v = vec2<u32>();
  let p = &v[1];
