// expect: taken
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var t: texture_external;
@group(0) @binding(2) var s: sampler;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let d = textureDimensions(t);
  let p = (vec2<f32>(gid.xy) + 0.5) / vec2<f32>(d);
  out[gid.x] = u32(textureSampleBaseClampToEdge(t, s, p).x) + u32(textureLoad(t, gid.xy % d).y);
}
