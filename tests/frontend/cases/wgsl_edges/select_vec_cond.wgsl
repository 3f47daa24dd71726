// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v = select(vec2<u32>(0u), vec2<u32>(1u), vec2<bool>(true, false));
  out[0u] = v.x;
