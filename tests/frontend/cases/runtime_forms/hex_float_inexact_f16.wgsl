// expect: refused "cannot be exactly"
// tint: refused
enable f16;
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  out[i] = u32(0x1.001p0h);
}
