// expect: taken
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<private> g: u32;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {

  out[0u] = 1u;
}
