// expect: taken
// tint: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var v = vec4<u32>(1u);
  v.xy = vec2<u32>(2u);
  out[0u] = v.x;
