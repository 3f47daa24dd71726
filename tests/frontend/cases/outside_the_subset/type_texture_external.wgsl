// expect: outside at 4:30 "type 'texture_external'"
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var t: texture_external;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {

  out[0u] = 1u;
}
