// expect: refused "returns no value"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
fn f(x: u32) {
  out[x] = x;
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let y = f(gid.x);
}
