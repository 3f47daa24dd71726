// expect: refused "which f also names"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
fn f(p: ptr<workgroup, u32>) {
  *p = w[1];
}
// {body}
  f(&w[0]);
