// expect: refused "case 1i is i32"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  switch gid.x { case 1i { } default { } }
