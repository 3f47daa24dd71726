// expect: refused "appears twice"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  switch gid.x { case 1u, 2u { } case 1u { } default { } }
