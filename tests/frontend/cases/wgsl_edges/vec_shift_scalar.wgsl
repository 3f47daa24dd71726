// expect: refused "(vec2<u32>(1u) << 2u): << shift amount must be vec2<u32>, got u32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v = vec2<u32>(1u) << 2u;
  out[0u] = v.x;
