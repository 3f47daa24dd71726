// expect: refused "not a const-expression"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  const_assert gid.x > 0u;
