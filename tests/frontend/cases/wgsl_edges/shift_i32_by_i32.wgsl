// expect: refused "(a << b): << shift amount must be u32, got i32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let a = 1i;
  let b = 2i;
  out[0u] = u32(a << b);
