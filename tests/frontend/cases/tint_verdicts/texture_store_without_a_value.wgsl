// expect: type error "no matching call to 'textureStore(texture_storage_2d<r32uint, write>, vec2<u32>)'"
// tint: refused "no matching call to 'textureStore(texture_storage_2d<r32uint, write>, vec2<u32>)'"
// in: ../_a_to_out.wgsl
@group(0) @binding(2) var t: texture_storage_2d<r32uint, write>;
// {body}
  textureStore(t, vec2<u32>(i, 0u));
  out[i] = 1u;
