// expect: refused "atomic<f32>: WGSL's atomics are atomic<u32> and atomic<i32>"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read_write> f: array<atomic<f32>>;
// {body}

