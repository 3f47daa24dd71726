// expect: type error at 5 "@builtin(global_invocation_id) on 'gid' and 'g2': WGSL takes each builtin once"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(global_invocation_id) g2: vec3<u32>) {

  out[0u] = 1u;
}
