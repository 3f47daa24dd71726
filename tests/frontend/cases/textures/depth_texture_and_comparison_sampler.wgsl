// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var t: texture_depth_2d_array;
@group(0) @binding(2) var s: sampler_comparison;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let uv = vec2<f32>(f32(gid.x % 4u), 0.5) / 4.0;
  let g = textureGatherCompare(t, s, uv, 1, 0.5);
  out[gid.x] = textureSampleCompareLevel(t, s, uv, gid.x % textureNumLayers(t), 0.25) + g.w
    + textureLoad(t, vec2<u32>(0u, 1u), 0, 0);
}
