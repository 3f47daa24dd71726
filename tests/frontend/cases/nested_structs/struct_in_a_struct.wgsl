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
@group(0) @binding(0) var<storage, read> heads: array<Head>;
@group(0) @binding(1) var<storage, read_write> out: array<Head>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let h = heads[gid.x];
  out[gid.x] = h;
  out[gid.x].span = Range(h.tags[1].lo, h.span.hi);
  out[gid.x].tags[0].hi = heads[gid.x].span.lo;
}
