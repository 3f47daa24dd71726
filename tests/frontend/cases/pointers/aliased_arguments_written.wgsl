// expect: refused "point into the same variable 'a'"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
fn f(p: ptr<function, u32>, q: ptr<function, u32>) {
  *p = *q;
}
// {body}
  var a = 1u;
  f(&a, &a);
