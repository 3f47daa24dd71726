// expect: refused "the ratio of indices (the third argument) must be f32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let r = refract(vec3f(1.0), vec3f(0.0, 1.0, 0.0), vec3f(1.0));
