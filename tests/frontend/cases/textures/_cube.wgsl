@group(0) @binding(0) var<storage, read> dirs: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var sky: texture_cube<f32>;
@group(0) @binding(3) var skies: texture_cube_array<f32>;
@group(0) @binding(4) var shadow: texture_depth_cube;
@group(0) @binding(5) var shadows: texture_depth_cube_array;
@group(0) @binding(6) var s: sampler;
@group(0) @binding(7) var sc: sampler_comparison;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
// {body}
  out[i] = 1.0;
}
