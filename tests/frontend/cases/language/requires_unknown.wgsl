// expect: refused "not a WGSL language feature"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
requires no_such_feature;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}

