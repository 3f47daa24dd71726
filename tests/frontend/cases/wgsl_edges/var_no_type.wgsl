// expect: syntax error "var x needs a type or an initialiser"
// tint: refused "var declaration requires a type or initializer"
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var x;
  out[0u] = 1u;
