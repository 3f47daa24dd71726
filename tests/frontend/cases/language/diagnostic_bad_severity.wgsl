// expect: refused "the severity is one of"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
diagnostic(loud, derivative_uniformity);
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}

