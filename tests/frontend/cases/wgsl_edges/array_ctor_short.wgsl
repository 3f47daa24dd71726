// expect: refused "array<u32, 3>(1u, 2u): components do not make a array<u32, 3>"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let a = array<u32, 3>(1u, 2u);
  out[0u] = a[0];
