// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var t: texture_storage_2d<bgra8unorm, write>;
@group(0) @binding(2) var u: texture_storage_2d<rg11b10ufloat, read>;
fn paint(c: vec2<u32>) {
  textureStore(t, c, textureLoad(u, c));
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = gid.x;
}
