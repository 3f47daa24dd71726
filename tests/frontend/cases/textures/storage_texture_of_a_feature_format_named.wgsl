// expect: type error at 5 "texture 't': format r8unorm does not support storage texture access write (WebGPU binds one only under the device feature texture-formats-tier1, which kvdsl does not request; the formats it binds are rgba8unorm, rgba8snorm, rgba8uint, rgba8sint, rgba16uint, rgba16sint, rgba16float, rgba32float, rgba32uint, rgba32sint, rg32float, rg32uint, rg32sint, r32float, r32uint, r32sint)"
// tint: refused "Texture format TextureFormat::R8Unorm does not support storage texture access StorageTextureAccess::WriteOnly"
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var t: texture_storage_2d<r8unorm, write>;
fn paint(c: vec2<u32>) {
  textureStore(t, c, vec4<f32>(0.5));
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  paint(gid.xy);
  out[gid.x] = gid.x;
}
