// expect: refused "let _ = 1u: name '_' is not a WGSL identifier: _ alone is the phony assignment's"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let _ = 1u;
  out[0u] = 1u;
