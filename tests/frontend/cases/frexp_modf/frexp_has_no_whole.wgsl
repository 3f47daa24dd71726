// expect: refused "has no field 'whole'"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let r = frexp(1.5);
  let w = r.whole;
