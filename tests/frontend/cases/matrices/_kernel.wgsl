enable f16;
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = x[gid.x];
  let m = mat2x2<f32>(v.xy, v.zw);
// {body}
  out[gid.x] = v;
}
