// expect: refused "an atomic lives in read_write storage or workgroup memory"
// tint: refused
// in: _kernel.wgsl
fn f(p: ptr<storage, atomic<u32>, read>) -> u32 {
  return atomicLoad(p);
}
// {body}

