// expect: refused "'select' is a const here, not the builtin function: it cannot be called"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
const select = 1u;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = select(0u, 1u, gid.x > 3u);
}
