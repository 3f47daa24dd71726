// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let w = gid.x * 2654435761u;
  let f = f32(gid.x) * 0.25;
  out[1u] = extractBits(w, 3u, 7u) + insertBits(w, 5u, 2u, 3u) + reverseBits(w)
    + countLeadingZeros(w) + countTrailingZeros(w) + firstTrailingBit(w)
    + pack4xU8Clamp(unpack4xU8(w)) + pack4xI8(unpack4xI8(w))
    + bitcast<u32>(dot4I8Packed(w, 0x01ff02feu)) + dot4U8Packed(w, w)
    + pack4x8snorm(unpack4x8snorm(w)) + pack2x16unorm(unpack2x16unorm(w))
    + u32(pow(f, 3.0) + sign(-f) + fract(f) + mix(f, 2.0, 0.5)
    + step(0.5, f) + smoothstep(0.0, 1.0, f) + ldexp(f, 2) + saturate(f)
    + length(vec2f(3.0, f)) + distance(vec2f(f), vec2f(2.0))
    + normalize(vec3f(1.0, f, 2.0)).x + cross(vec3f(f, 0.0, 0.0),
    vec3f(0.0, 1.0, f)).z + atan2(f, 1.0) + tanh(f) + exp2(f) + log2(f + 1.0)
    + degrees(f) + radians(f) + quantizeToF16(f) + asinh(f) + acosh(f + 1.0))
    + select(0u, 1u, all(vec2<bool>(true, gid.x > 0u)) || any(vec2<bool>(false, f > 1.0)));
