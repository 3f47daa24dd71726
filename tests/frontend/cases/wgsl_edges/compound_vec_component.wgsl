// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var v = vec2<u32>(1u);
  v.x += 1u;
  out[0u] = v.x;
