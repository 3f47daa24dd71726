// expect: type error "no matching call to 'textureLoad(texture_2d<f32>, vec2<u32>)'"
// tint: refused "no matching call to 'textureLoad(texture_2d<f32>, vec2<u32>)'"
// in: ../_a_to_out.wgsl
@group(0) @binding(2) var t: texture_2d<f32>;
// {body}
  out[i] = u32(textureLoad(t, vec2<u32>(i, 0u)).x);
