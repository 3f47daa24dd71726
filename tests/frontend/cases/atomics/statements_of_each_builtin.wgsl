// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
// {body}
  atomicLoad(&c[0]);
  atomicAdd(&c[1], 1u);
  atomicSub(&c[1], 1u);
  atomicMax(&c[2], gid.x);
  atomicMin(&c[2], gid.x);
  atomicAnd(&c[3], gid.x);
  atomicOr(&c[3], gid.x);
  atomicXor(&c[3], gid.x);
  atomicExchange(&c[4], 2u);
  atomicCompareExchangeWeak(&c[5], 1u, 2u);
  atomicStore(&c[6], 3u);
