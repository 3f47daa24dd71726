// expect: refused "clamp(gid.x, 5u, 1u): the constant low bound 5u is above the high bound 1u"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = clamp(gid.x, 5u, 1u);
