// expect: refused "ctr.done: an element of type atomic<u32> is read and written only through the atomic builtins"
// tint: refused "cannot assign 'u32' to 'atomic<u32>'"
// naga: taken
// in: _counters.wgsl
@group(0) @binding(0) var<storage, read_write> ctr: Counters;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
// {body}
  ctr.done = 0u;
  out[gid.x] = 1u;
