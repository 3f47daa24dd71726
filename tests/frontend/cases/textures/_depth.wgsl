@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var d: texture_depth_2d;
@group(0) @binding(3) var da: texture_depth_2d_array;
@group(0) @binding(4) var sc: sampler_comparison;
@group(0) @binding(5) var s: sampler;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
// {body}
  out[i] = 1.0;
}
