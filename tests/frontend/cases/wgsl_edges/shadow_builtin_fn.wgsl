// expect: refused "let min = 1u: name 'min' is a WGSL type's or builtin function's, which kvdsl reads it as wherever it appears: give another"
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let min = 1u;
  out[0u] = min;
  out[0u] = 1u;
}
