// expect: refused "appears twice"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  switch gid.x { case 1u, 2u { } case 1u { } default { } }
  out[0u] = 1u;
}
