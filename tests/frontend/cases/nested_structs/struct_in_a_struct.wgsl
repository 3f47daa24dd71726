// expect: taken
// tint: taken
// naga: taken
struct Range {
  lo: u32,
  hi: u32,
}
struct Head {
  span: Range,
  scale: vec3<f32>,
  tags: array<Range, 2>,
}
struct Acc {
  sum: f32,
  count: Range,
}
@group(0) @binding(0) var<storage, read> heads: array<Head>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<Head>;
@group(0) @binding(3) var<storage, read_write> sums: array<f32>;
fn add(a: Acc, v: f32) -> Acc {
  var r = a;
  r.sum += v;
  r.count.hi += 1u;
  return r;
}
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let h = heads[i];
  var acc = Acc(0.0, Range(h.span.lo, 0u));
  for (var k = h.span.lo; k < h.span.hi; k++) {
    acc = add(acc, x[k] * h.scale.y);
  }
  sums[i] = acc.sum + f32(acc.count.hi) + f32(h.tags[1].hi);
  out[i] = h;
  out[i].span = Range(acc.count.lo, acc.count.hi);
  out[i].tags[0].lo = heads[i].tags[1].lo + 7u;
}
