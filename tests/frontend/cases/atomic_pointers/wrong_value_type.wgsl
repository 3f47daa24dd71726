// expect: refused "atomicAdd of an atomic<u32> takes u32 values, got i32"
// tint: refused
// in: _kernel.wgsl
  let p = &counts[1];
  atomicAdd(p, 1i);
