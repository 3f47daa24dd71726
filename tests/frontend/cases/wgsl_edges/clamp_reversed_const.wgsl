// expect: refused "clamp(gid.x, 5u, 1u): the constant low bound 5u is above the high bound 1u"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = clamp(gid.x, 5u, 1u);
  out[0u] = 1u;
}
