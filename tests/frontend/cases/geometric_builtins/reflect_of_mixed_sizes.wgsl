// expect: refused "reflect"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let r = reflect(vec3f(1.0), vec2f(1.0));
