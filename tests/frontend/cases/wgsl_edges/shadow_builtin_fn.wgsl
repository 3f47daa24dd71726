// expect: refused "let min = 1u: name 'min' is a WGSL type's or builtin function's, which kvdsl reads it as wherever it appears: give another"
// tint: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let min = 1u;
  out[0u] = min;
