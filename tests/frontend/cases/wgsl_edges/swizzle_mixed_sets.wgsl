// expect: refused "v.xg: invalid swizzle 'xg' of vec4<u32>"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v = vec4<u32>(1u);
  out[0u] = v.xg.x;
