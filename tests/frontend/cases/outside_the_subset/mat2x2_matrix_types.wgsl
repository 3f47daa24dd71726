// expect: outside at 6:11 "'mat2x2' (matrix types)"
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let m = mat2x2<f32>(1.0, 0.0, 0.0, 1.0);
  out[0u] = 1u;
}
