// expect: refused "arrayLength takes a runtime-sized array (rows.data)"
// tint: refused
struct Rows {
  n: u32,
  scale: f32,
  data: array<vec4<f32>>,
}

@group(0) @binding(0) var<storage, read> rows: Rows;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= min(rows.n, arrayLength(&rows.n))) {
    return;
  }
  out[i] = rows.data[i].y * rows.scale + rows.data[i][3] + f32(arrayLength(&rows.n));
}
