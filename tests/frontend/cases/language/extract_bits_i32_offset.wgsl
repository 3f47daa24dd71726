// expect: refused "must be u32"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[1u] = extractBits(gid.x, 1i, 2u);
