// How the CLIs print numbers: the one place for it in JavaScript; src/cli/numbers.c prints the
// same characters in C (tests/c/test_cli.c holds it to these).

/** '0' for zero, else x.toExponential(2). */
export const fmt = (x) => (x === 0 ? '0' : x.toExponential(2));

/** a and b as short as tells them apart: 6 significant digits, more where both would print alike. */
export function pair(a, b) {
  for (let digits = 6; digits < 17; digits++) {
    const x = String(Number(a.toPrecision(digits))), y = String(Number(b.toPrecision(digits)));
    if (x !== y || digits === 16) return [x, y];
  }
  return [String(a), String(b)];
}

/** A finite number as itself, else its name as a string (JSON has no NaN or Infinity). */
export const jsonNumber = (x) => (Number.isFinite(x) ? x : String(x));
