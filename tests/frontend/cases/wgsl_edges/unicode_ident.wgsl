// expect: refused "unexpected character 'é' (U+00E9)"
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let é = 1u;
  out[0u] = é;
  out[0u] = 1u;
}
