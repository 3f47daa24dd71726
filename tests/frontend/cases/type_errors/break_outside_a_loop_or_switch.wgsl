// expect: type error at 7 "break outside a loop or switch"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (true) {
    break;
  }
  out[0u] = 1u;
}
