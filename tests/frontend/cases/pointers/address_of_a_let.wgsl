// expect: refused "a value, not memory"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let a = 1u;
  let p = &a;
