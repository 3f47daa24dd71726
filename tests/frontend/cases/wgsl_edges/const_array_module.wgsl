// expect: outside "const A of type array<u32, 2> (scalar consts only)"
// tint: taken
const A = array<u32, 2>(1u, 2u);
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = A[1];
  out[0u] = 1u;
}
