// expect: type error at 3:59 "cannot use 'function u32' as type"
// tint: refused "var 'out' references function 'u32' here"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn u32() {
  out[0] = 1u;
}
