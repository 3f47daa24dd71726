// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
// {body}
  loop {
    let seen = atomicLoad(&c[0]);
    let r = atomicCompareExchangeWeak(&c[0], seen, seen * 2u + 1u);
    if r.exchanged {
      break;
    }
  }
