// expect: taken
// tint: taken
// naga: taken
const W: u32 = 32u;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(W * 2u)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = 1u;
}
