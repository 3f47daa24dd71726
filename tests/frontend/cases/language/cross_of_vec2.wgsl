// expect: refused "3-component"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let c = cross(vec2f(1.0), vec2f(2.0));
