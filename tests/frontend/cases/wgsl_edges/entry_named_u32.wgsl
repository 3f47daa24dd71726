// expect: refused "entry point u32: name 'u32' is a WGSL type's or a builtin's that kvdsl reads as such wherever it appears: give another"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn u32() {
  out[0] = 1u;
}
