// expect: type error "which textureStore does not take"
// tint: refused "no matching call to 'textureStore(texture_storage_2d<r32uint, read>"
// in: _storage.wgsl
  textureStore(ids, c, vec4<u32>(1u));
