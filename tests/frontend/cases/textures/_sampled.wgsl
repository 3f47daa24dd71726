@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var vol: texture_3d<f32>;
@group(0) @binding(3) var ids: texture_3d<u32>;
@group(0) @binding(4) var img: texture_2d<f32>;
@group(0) @binding(5) var s: sampler;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
// {body}
  out[i] = 1.0;
}
