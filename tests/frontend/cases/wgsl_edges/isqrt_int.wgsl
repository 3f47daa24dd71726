// expect: refused "inverseSqrt(4i): inverseSqrt expects float operands, got i32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = u32(inverseSqrt(4i));
  out[0u] = 1u;
}
