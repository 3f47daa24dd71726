// expect: syntax error at 8:3 "unexpected 'out'; expected one of ';', '@', 'alias', 'const', 'const_assert', 'fn', 'override', 'struct', 'var' or end of input"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = 1u;
  }
  out[0u] = 1u;
}
