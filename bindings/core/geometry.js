// One axis of SEMANTICS.md's bilinear sampling, in float64: a coordinate in [0, 1] to a pixel
// position (pixel), then the padding (pad). Shared by the float64 reference (reference.js) and
// crosscheck's bounded reference (cli/bounds.js), so both read the contract the same way.
// Part of bindings/core/: environment-neutral code.

// SEMANTICS' padding of one pixel coordinate: null when the sample contributes nothing.
export function pad(pos, size, paddingMode, scale) {
  if (Number.isNaN(pos)) return null;
  let derivative = 1;
  if (paddingMode === 'border') {
    if (!(pos > 0 && pos < size - 1)) {
      derivative = 0;
      pos = pos <= 0 ? 0 : size - 1;
    }
  } else if (!(pos >= -1 && pos < size)) {
    return null;
  }
  const i0 = Math.floor(pos);
  return { i0, frac: pos - i0, gradScale: scale * derivative };
}

export function pixel(coord, size, alignCorners) {
  if (alignCorners) return { pos: size === 1 && !Number.isNaN(coord) ? 0 : coord * (size - 1), scale: size - 1 };
  return { pos: coord * size - 0.5, scale: size };
}
