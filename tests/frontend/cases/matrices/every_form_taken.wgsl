// expect: taken
// tint: taken
// naga: taken
// in: _kernel.wgsl
  var a = mat2x3f();
  a[1] = v.xyz;
  a[0][2] = m[1][0];
  let b = mat2x3(v.x, v.y, v.z, v.w, 1.0, 2.0);
  let c = mat2x2h(vec2<f16>(v.xy), vec2<f16>(1.0h, 2.0h));
  let d = transpose(a) * b * m + mat2x2(1, 2, 3, 4) - 2.0 * m * 0.5;
  let e = v.xy * d * (m * v.zw);
  let f = vec2<f32>(c * vec2<f16>(e)) + a[1] * b;
  out[gid.x + 1u] = vec4<f32>(f, determinant(mat3x3<f32>(a[0], a[1], v.xyz)), f32(determinant(c)));
