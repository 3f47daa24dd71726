// expect: refused "f is @must_use"
// tint: refused
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@must_use fn f(x: u32) -> u32 { return x; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  f(gid.x);
}
