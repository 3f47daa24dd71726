// expect: refused "let x: u32 is initialised with a f32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let x: u32 = 1.5;
  out[0u] = x;
