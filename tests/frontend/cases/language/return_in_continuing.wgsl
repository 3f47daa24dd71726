// expect: refused "return in a continuing block"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  loop {
    if gid.x > 2u { break; }
    continuing {
      return;
    }
  }
  out[0u] = 1u;
}
