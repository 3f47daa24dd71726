// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var v = vec4<u32>(1u);
  v[2] = 3u;
  out[0u] = v.z;
