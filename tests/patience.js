// How long a test waits for something that should happen before it calls it a hang: long
// enough for a healthy step on a machine twenty times over-committed (make test beside other
// work), so that only a real hang fails, never a slow machine. Speed is make bench's business.
export const PATIENCE_MS = 600_000;
