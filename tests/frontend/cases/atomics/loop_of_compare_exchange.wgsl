// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  loop {
    let seen = atomicLoad(&c[0]);
    let r = atomicCompareExchangeWeak(&c[0], seen, seen * 2u + 1u);
    if r.exchanged {
      break;
    }
  }
  out[0u] = 1u;
}
