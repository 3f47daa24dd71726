// expect: refused "fma(1u, 2u, 3u): fma expects float operands, got u32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = fma(1u, 2u, 3u);
  out[0u] = 1u;
}
