// expect: taken
// tint: taken
// naga: taken
struct Frame {
  basis: mat3x3<f32>,
  origin: vec3<f32>,
  tags: array<mat2x4<f32>, 2>,
}
struct Params {
  count: u32,
  warp: mat4x3<f32>,
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> frames: array<Frame>;
@group(0) @binding(2) var<storage, read_write> whole: mat4x4<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<array<mat2x2<f32>, 2>>;
var<workgroup> shared_m: array<mat3x2<f32>, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let f = frames[gid.x];
  shared_m[lid.x] = transpose(mat2x3<f32>(f.basis[0], f.origin));
  workgroupBarrier();
  let s = shared_m[(lid.x + 1u) % 64u];
  let p = params.warp * vec4<f32>(f.origin, 1.0);
  out[gid.x][0] = mat2x2<f32>(s[0], s[2]);
  out[gid.x][1][1] = p.xy + frames[gid.x].tags[1][0].zw;
  if (gid.x == 0u) {
    whole = mat4x4<f32>();
    whole[3] = vec4<f32>(p, f32(params.count));
  }
}
