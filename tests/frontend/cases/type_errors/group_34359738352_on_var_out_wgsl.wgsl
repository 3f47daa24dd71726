// expect: type error at 3 "@group(34359738352) on var 'out': WGSL takes a non-negative i32 (0 to 2147483647)"
// tint: refused
@group(0x7FFFFFFF0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {

  out[0u] = 1u;
}
