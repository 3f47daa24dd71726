// expect: outside at 6:11 "WGSL builtin 'dpdx'"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let d = dpdx(1.0);
  out[0u] = 1u;
}
