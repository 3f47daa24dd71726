// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
alias V = vec4<u32>;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v = V(1u, 2u, 3u, 4u);
  out[1u] = v.w;
