// expect: taken
// tint: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
fn f(p: ptr<function, u32>, q: ptr<function, u32>) -> u32 {
  return *p + *q;
}
// {body}
  var a = 1u;
  out[1] = f(&a, &a);
