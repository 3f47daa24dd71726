@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(2) var img: texture_2d<f32>;
@group(0) @binding(3) var ids: texture_2d_array<u32>;
@group(0) @binding(4) var d: texture_depth_2d;
@group(0) @binding(5) var s: sampler;
const C = 3u;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
// {body}
  out[i] = vec4<f32>(1.0);
}
