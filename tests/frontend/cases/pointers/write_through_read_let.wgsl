// expect: refused "only a read_write pointer is written through"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
// {body}
  let p = &src[0];
  *p = 1u;
