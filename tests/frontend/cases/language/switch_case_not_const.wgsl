// expect: refused "not a const-expression"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let y = gid.y;
  switch gid.x { case y { } default { } }
  out[0u] = 1u;
}
