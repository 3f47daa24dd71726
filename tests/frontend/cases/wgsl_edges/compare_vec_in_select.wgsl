// expect: refused "select(0u, 1u, (vec2<u32>(1u) == vec2<u32>(1u))): select select condition must be bool, got vec2<bool>"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v = select(0u, 1u, vec2<u32>(1u) == vec2<u32>(1u));
  out[0u] = v;
