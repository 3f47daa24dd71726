// expect: refused "faceForward"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let r = faceForward(vec2i(1), vec2i(1), vec2i(1));
