// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var t: texture_3d<f32>;
@group(0) @binding(2) var s: sampler;
@group(0) @binding(3) var ids: texture_3d<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let d = textureDimensions(t);
  let p = (vec3<f32>(gid) + 0.5) / vec3<f32>(d);
  out[gid.x] = u32(textureSampleLevel(t, s, p, 0.0).x) + textureLoad(ids, gid % d, 0).y;
}
