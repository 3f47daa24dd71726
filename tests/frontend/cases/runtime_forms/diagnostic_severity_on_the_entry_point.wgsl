// expect: refused "the severity is one of"
// tint: refused
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@diagnostic(loud, derivative_uniformity)
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0] = 1u;
}
