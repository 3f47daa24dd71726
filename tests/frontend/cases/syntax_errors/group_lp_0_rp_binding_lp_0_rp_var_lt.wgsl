// expect: syntax error at 3:44 "unexpected 'array'; expected one of ':', ';' or '='"
// tint: refused
@group(0) @binding(0) var<storage, read> x array<f32>;
