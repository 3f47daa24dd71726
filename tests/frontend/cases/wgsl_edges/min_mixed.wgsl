// expect: refused "min(1u, 2i): min operands of different types: u32, i32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = u32(min(1u, 2i));
  out[0u] = 1u;
}
