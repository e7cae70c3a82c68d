// How the page prints numbers: fixed notation (no e-notation), digits by magnitude. Shared
// with the browser tests, which format the Node API's numbers the same way and compare texts.

// About `sig` significant digits in fixed notation, at most `maxDecimals` decimals.
export function fixed(x, sig = 3, maxDecimals = 6) {
  if (!Number.isFinite(x)) return String(x);
  if (x === 0) return '0';
  const magnitude = Math.floor(Math.log10(Math.abs(x)));
  const decimals = Math.min(maxDecimals, Math.max(0, sig - 1 - magnitude));
  return x.toFixed(decimals);
}

// The loss: 4 significant digits down to 1e-8.
export const formatLoss = (x) => fixed(x, 4, 8);

// A gradient with its sign (+ raises the loss); values below 5e-7 read as ±0.000000.
export function formatGrad(x) {
  const s = fixed(x, 3, 6);
  return x > 0 ? `+${s}` : s;
}

// A weight or a feature value: three decimals.
export const formatValue = (x) => (Number.isFinite(x) ? x.toFixed(3) : String(x));
