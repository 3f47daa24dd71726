// expect: taken
// tint: taken
// naga: taken
struct Range {
  lo: u32,
  hi: u32,
}
struct Acc {
  sum: f32,
  span: Range,
}
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
fn widen(a: Acc, k: u32) -> Acc {
  var r = a;
  r.span.hi = max(r.span.hi, k);
  return r;
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var acc = Acc(0.0, Range(gid.x, gid.x));
  acc = widen(acc, 7u);
  out[gid.x] = acc.span.hi + acc.span.lo;
}
