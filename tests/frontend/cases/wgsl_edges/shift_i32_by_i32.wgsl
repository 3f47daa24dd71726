// expect: refused "(a << b): << shift amount must be u32, got i32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let a = 1i;
  let b = 2i;
  out[0u] = u32(a << b);
  out[0u] = 1u;
}
