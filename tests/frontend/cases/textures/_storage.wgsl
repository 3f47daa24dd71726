@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var acc: texture_storage_2d<r32float, read_write>;
@group(0) @binding(2) var src: texture_storage_2d<rgba32float, read>;
@group(0) @binding(3) var ids: texture_storage_2d<r32uint, read>;
@group(0) @binding(4) var img: texture_storage_2d<r32float, write>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let d = textureDimensions(acc);
  let c = vec2<u32>(gid.x % d.x, gid.x / d.x);
// {body}
  out[gid.x] = 1.0;
}
