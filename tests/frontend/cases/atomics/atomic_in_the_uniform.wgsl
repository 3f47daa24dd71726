// expect: type error "field a: atomic<u32> holds an atomic (atomics live in storage or workgroup memory)"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
struct P { a: atomic<u32> }
@group(0) @binding(2) var<uniform> params: P;
// {body}

