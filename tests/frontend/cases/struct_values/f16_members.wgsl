// expect: taken
// tint: taken
// naga: taken
enable f16;
struct Half {
  lo: f16,
  pair: vec2<f16>,
  n: u32,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
fn scaled(h: Half, k: f16) -> Half {
  var r = h;
  r.lo *= k;
  r.pair.y = r.pair.x + k;
  return r;
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = f16(x[gid.x]);
  let h = scaled(Half(v, vec2<f16>(v, -v), gid.x), 1.5h);
  out[gid.x] = f32(h.lo) + f32(h.pair.y) + f32(h.n);
}
