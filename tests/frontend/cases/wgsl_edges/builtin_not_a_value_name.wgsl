// expect: type error "@builtin of 'v': expected builtin value name"
// tint: refused "expected builtin value name"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(invocation_id) v: u32) { out[0u] = v; }
