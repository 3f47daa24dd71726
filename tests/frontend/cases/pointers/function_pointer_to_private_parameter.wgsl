// expect: refused "takes (ptr<private, u32>), got (ptr<function, u32>)"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
fn f(p: ptr<private, u32>) {
  *p = 2u;
}
// {body}
  var a = 1u;
  f(&a);
