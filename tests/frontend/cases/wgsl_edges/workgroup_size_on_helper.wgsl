// expect: type error "attribute @workgroup_size on helper function f (a helper takes @must_use and @diagnostic)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@workgroup_size(64) fn f(x: u32) -> u32 { return x; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = f(1u);
}
