// expect: refused "expects (vec4<i32>)"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[1u] = pack4xI8(vec4<u32>(1u));
  out[0u] = 1u;
}
