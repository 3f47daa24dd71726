// expect: refused "atomicAdd(p): the pointer is not to an atomic<u32> or atomic<i32>"
// tint: refused
// in: _kernel.wgsl
  let p = &o[0];
  atomicAdd(p, 1u);
