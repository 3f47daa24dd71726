// expect: refused "takes a float vector, got f32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let r = reflect(1.0, 2.0);
