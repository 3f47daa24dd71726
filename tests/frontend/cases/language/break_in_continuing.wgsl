// expect: refused "break in a continuing block"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  loop {
    continuing {
      break;
    }
  }
  out[0u] = 1u;
}
