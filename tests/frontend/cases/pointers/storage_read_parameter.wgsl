// expect: taken
// tint: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
fn f(p: ptr<storage, u32, read>) -> u32 {
  return *p;
}
// {body}
  out[1] = f(&src[gid.x]);
