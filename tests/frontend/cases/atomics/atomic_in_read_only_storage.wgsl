// expect: refused "atomics in storage are read_write"
// tint: refused
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read> r: array<atomic<u32>>;
// {body}
  let x = atomicLoad(&r[0]);
