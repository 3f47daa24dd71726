// expect: refused "a var cannot have type ptr"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var a = 1u;
  var p = &a;
