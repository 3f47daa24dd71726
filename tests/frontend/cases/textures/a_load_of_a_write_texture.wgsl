// expect: type error "which textureLoad without a level does not read"
// tint: refused "no matching call to 'textureLoad(texture_storage_2d<r32float, write>"
// in: _storage.wgsl
  let v = textureLoad(img, c);
