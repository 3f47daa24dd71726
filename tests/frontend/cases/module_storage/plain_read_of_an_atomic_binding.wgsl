// expect: refused "binding 'n' of type atomic<u32> is read and written only through the atomic builtins"
// tint: refused "cannot assign 'atomic<u32>' to 'u32'"
// naga: taken
@group(0) @binding(0) var<storage, read_write> n: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = n;
}
