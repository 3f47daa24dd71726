// expect: refused "is initialised with"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let x: f32 = frexp(1.5);
