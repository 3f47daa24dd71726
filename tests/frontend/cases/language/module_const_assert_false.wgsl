// expect: refused "the assertion is false"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
const C = 3u;
const_assert C == 4u;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}

