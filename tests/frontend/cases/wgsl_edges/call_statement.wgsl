// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
fn f(x: u32) -> u32 { return x; }
// {body}
  f(1u);
