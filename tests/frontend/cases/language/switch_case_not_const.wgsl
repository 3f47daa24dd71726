// expect: refused "not a const-expression"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let y = gid.y;
  switch gid.x { case y { } default { } }
