// expect: syntax error at 6:41 "WGSL reads 'x <' as the start of a template list that the '>' at 6:60 closes (template lists are found before parsing, commas notwithstanding): parenthesise the comparison"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = select(0u, 1u, select(gid.x < 2u, false, gid.y >= 3u));
  out[0u] = 1u;
}
