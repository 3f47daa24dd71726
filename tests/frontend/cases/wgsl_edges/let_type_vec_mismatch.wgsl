// expect: refused "let v: vec2<u32> is initialised with a vec2<i32>"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v: vec2<u32> = vec2<i32>(1i);
  out[0u] = v.x;
