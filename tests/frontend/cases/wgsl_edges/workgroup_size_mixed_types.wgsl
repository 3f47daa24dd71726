// expect: refused "@workgroup_size arguments of different types (i32, u32): WGSL takes all i32 or all u32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64u, 1i)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = 1u;
}
