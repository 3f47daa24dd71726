// expect: refused "select(0u, 1i, true): select select branches differ: u32 and i32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = select(0u, 1i, true);
