// expect: refused "an atomic lives in read_write storage or workgroup memory"
// tint: refused
// in: _kernel.wgsl
fn f(p: ptr<function, atomic<u32>>) -> u32 {
  return atomicLoad(p);
}
// {body}

