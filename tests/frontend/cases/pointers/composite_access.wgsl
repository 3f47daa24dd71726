// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
fn f(p: ptr<function, array<u32, 4>>) {
  p[2] = 3u;
}
// {body}
  var a: array<u32, 4>;
  f(&a);
  out[1] = a[2];
