// expect: type error at 6 "out[0u] = 1.5f: cannot store f32 into out[0u] of type u32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = 1.5;
  out[0u] = 1u;
}
