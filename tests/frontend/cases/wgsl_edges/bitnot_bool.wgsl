// expect: refused "~true: ~ expects integer operands, got bool"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = ~true;
  out[0u] = select(0u, 1u, b);
  out[0u] = 1u;
}
