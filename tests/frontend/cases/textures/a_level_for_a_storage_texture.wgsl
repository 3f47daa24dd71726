// expect: type error "which textureLoad does not read"
// tint: refused "no matching call to 'textureLoad(texture_storage_2d<r32float, read_write>"
// in: _storage.wgsl
  let v = textureLoad(acc, c, 0);
