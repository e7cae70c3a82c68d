// NumPy .npz archives (zip files of .npy members, as np.savez writes them stored and
// np.savez_compressed deflated), read strictly: the central directory (zip64 too), each member's
// local header, its CRC-32. The twin of src/cli/npz.c: same refusals, same words. Deflated
// members need an inflateRaw(bytes) => bytes from the caller (node:zlib's in the CLI).
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

export class NpzError extends Error {
  constructor(message) {
    super(message);
    this.name = 'NpzError';
  }
}
const fail = (message) => { throw new NpzError(message); };

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// A member's name as messages show it: bytes outside printable ASCII and backslashes as \xNN,
// cut to 200 characters and '...' (the native CLI shows names the same way).
export function shown(name) {
  let out = '';
  for (let i = 0; i < name.length && out.length <= 200; i++) {
    const c = name.charCodeAt(i);
    out += c < 0x20 || c >= 0x7f || c === 0x5c ? `\\x${c.toString(16).padStart(2, '0')}` : name[i];
  }
  return out.length > 200 ? `${out.slice(0, 200)}...` : out;
}

/** Is this the start of a zip archive? */
export const looksLikeZip = (bytes) => bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 3 && bytes[3] === 4;

/**
 * The members of an .npz held in bytes: a Map from name to { method: 'stored' | 'deflated',
 * read() }, read() giving the member's bytes (checked against its size and CRC-32). Throws
 * NpzError with what is wrong.
 */
export function parseNpz(bytes, inflateRaw) {
  const len = bytes.length;
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u16 = (p) => v.getUint16(p, true), u32 = (p) => v.getUint32(p, true);
  const u64 = (p) => {
    const x = v.getBigUint64(p, true);
    return x > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(x);
  };
  // The end of central directory record: the last one whose comment ends the file.
  let eocd = -1;
  for (let p = len - 22; p >= 0 && p >= len - 22 - 65535; p--) {
    if (u32(p) === 0x06054b50 && p + 22 + u16(p + 20) === len) { eocd = p; break; }
  }
  if (eocd < 0) fail('not a valid .npz: no zip end-of-central-directory record');
  let entries = u16(eocd + 10), cdSize = u32(eocd + 12), cdOffset = u32(eocd + 16);
  if (u16(eocd + 4) !== 0 || u16(eocd + 6) !== 0 || u16(eocd + 8) !== entries) fail('not a valid .npz: a multi-part zip archive');
  if (entries === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
    const loc = eocd - 20;
    if (loc < 0 || u32(loc) !== 0x07064b50) fail('not a valid .npz: zip64 fields without a zip64 locator');
    const z = u64(loc + 8);
    if (!(z + 56 <= loc) || u32(z) !== 0x06064b50) fail('not a valid .npz: the zip64 end record is not where its locator says');
    entries = u64(z + 32);
    cdSize = u64(z + 40);
    cdOffset = u64(z + 48);
  }
  if (!(cdOffset + cdSize <= eocd)) fail('not a valid .npz: the central directory lies outside the file');
  const members = new Map();
  let p = cdOffset;
  for (let k = 0; k < entries; k++) {
    if (p + 46 > cdOffset + cdSize || u32(p) !== 0x02014b50) fail(`not a valid .npz: central directory entry ${k} is damaged`);
    const flags = u16(p + 8), method = u16(p + 10), crc = u32(p + 16);
    let csize = u32(p + 20), usize = u32(p + 24), offset = u32(p + 42);
    const nameLen = u16(p + 28), extraLen = u16(p + 30), commentLen = u16(p + 32);
    if (p + 46 + nameLen + extraLen + commentLen > cdOffset + cdSize) fail(`not a valid .npz: central directory entry ${k} is damaged`);
    const name = String.fromCharCode(...bytes.subarray(p + 46, p + 46 + nameLen));
    if (name.includes('\0')) fail(`not a valid .npz: the name of central directory entry ${k} holds a NUL byte`);
    // zip64 extra field: the 64-bit values of the 32-bit fields that are 0xffffffff, in order
    for (let e = p + 46 + nameLen; e + 4 <= p + 46 + nameLen + extraLen;) {
      const id = u16(e), size = u16(e + 2);
      if (id === 1) {
        let q = e + 4;
        const take = () => {
          if (q + 8 > e + 4 + size) fail(`not a valid .npz: the zip64 field of ${shown(name)} is too short`);
          const x = u64(q);
          q += 8;
          return x;
        };
        if (usize === 0xffffffff) usize = take();
        if (csize === 0xffffffff) csize = take();
        if (offset === 0xffffffff) offset = take();
      }
      e += 4 + size;
    }
    p += 46 + nameLen + extraLen + commentLen;
    if (flags & 1) fail(`${shown(name)}: encrypted, which .npz files never are`);
    if (method !== 0 && method !== 8) fail(`${shown(name)}: zip compression method ${method}, expected stored (np.savez) or deflated (np.savez_compressed)`);
    if (members.has(name)) fail(`not a valid .npz: ${shown(name)} appears twice`);
    if (!(offset + 30 <= cdOffset) || u32(offset) !== 0x04034b50) fail(`not a valid .npz: the local header of ${shown(name)} is damaged`);
    const start = offset + 30 + u16(offset + 26) + u16(offset + 28);
    if (!(start + csize <= cdOffset)) fail(`not a valid .npz: the data of ${shown(name)} lies outside the file`);
    if (method === 0 && csize !== usize) fail(`not a valid .npz: ${shown(name)} is stored with ${csize} bytes but says it holds ${usize}`);
    members.set(name, {
      method: method === 0 ? 'stored' : 'deflated',
      read() {
        let data = bytes.subarray(start, start + csize);
        if (method === 8) {
          try {
            data = inflateRaw(data);
          } catch {
            fail('the deflated data is damaged');
          }
          if (data.length > usize) fail(`inflates to more than the ${usize} bytes the archive says`);
          if (data.length !== usize) fail(`inflates to ${data.length} bytes, the archive says ${usize}`);
        }
        if (crc32(data) !== crc) fail('CRC-32 mismatch: the archive is damaged');
        return data;
      },
    });
  }
  return members;
}
