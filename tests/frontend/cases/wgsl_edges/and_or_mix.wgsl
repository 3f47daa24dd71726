// expect: refused "unexpected '|'; expected one of '&' or ';'"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let a = 1u; let b = 2u; let c = 3u;
  out[0u] = a & b | c;
  out[0u] = 1u;
}
