// expect: type error "var<private> p: type array<atomic<u32>, 4> (a private var holds no atomic)"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
var<private> p: array<atomic<u32>, 4>;
// {body}

