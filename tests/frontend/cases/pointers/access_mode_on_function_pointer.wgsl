// expect: refused "an access mode is given for storage only"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
var<workgroup> w: array<u32, 64>;
fn f(p: ptr<function, u32, read_write>) {
  *p = 3u;
}
// {body}

