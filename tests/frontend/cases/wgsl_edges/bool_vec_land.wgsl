// expect: refused "(vec2<bool>(true) && vec2<bool>(false)): && expects bool operands, got vec2<bool>, vec2<bool>"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v = vec2<bool>(true) && vec2<bool>(false);
  out[0u] = 1u;
