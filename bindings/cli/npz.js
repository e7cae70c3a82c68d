// NumPy .npz archives (zip files of .npy members, as np.savez writes them stored and
// np.savez_compressed deflated), read strictly: the central directory (zip64 too), each member's
// local header, its CRC-32. The JS CLI's alone (the native CLI reads directories). Deflated
// members need an inflateRaw(bytes, maxOutputLength) => bytes from the caller, which throws past
// maxOutputLength bytes (node:zlib's inflateRawSync with that option, in the CLI).
// Bytes in, bytes out: no files here (bindings/cli/cases.js reads them).

import { shown } from './messages.js';

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
  // 64-bit values stay BigInt until checked against the file (messages print them exactly)
  const u64 = (p) => v.getBigUint64(p, true);
  // The end of central directory record: the last one whose comment ends the file.
  let eocd = -1;
  for (let p = len - 22; p >= 0 && p >= len - 22 - 65535; p--) {
    if (u32(p) === 0x06054b50 && p + 22 + u16(p + 20) === len) { eocd = p; break; }
  }
  if (eocd < 0) fail('not a valid .npz: no zip end-of-central-directory record');
  let entries = BigInt(u16(eocd + 10)), cdSize = BigInt(u32(eocd + 12)), cdOffset = BigInt(u32(eocd + 16));
  if (u16(eocd + 4) !== 0 || u16(eocd + 6) !== 0 || BigInt(u16(eocd + 8)) !== entries) fail('not a valid .npz: a multi-part zip archive');
  if (entries === 0xffffn || cdSize === 0xffffffffn || cdOffset === 0xffffffffn) {
    const loc = eocd - 20;
    if (loc < 0 || u32(loc) !== 0x07064b50) fail('not a valid .npz: zip64 fields without a zip64 locator');
    const z = u64(loc + 8);
    if (!(z + 56n <= BigInt(loc)) || u32(Number(z)) !== 0x06064b50) fail('not a valid .npz: the zip64 end record is not where its locator says');
    entries = u64(Number(z) + 32);
    cdSize = u64(Number(z) + 40);
    cdOffset = u64(Number(z) + 48);
  }
  if (!(cdOffset + cdSize <= BigInt(eocd))) fail('not a valid .npz: the central directory lies outside the file');
  // each entry takes at least 46 bytes
  if (entries > cdSize / 46n) fail(`not a valid .npz: the central directory says it holds ${entries} entries, more than its ${cdSize} bytes can`);
  const cdEnd = Number(cdOffset + cdSize), cdStart = Number(cdOffset);
  const members = new Map(), names = [];
  let p = cdStart;
  for (let k = 0; k < Number(entries); k++) {
    if (p + 46 > cdEnd || u32(p) !== 0x02014b50) fail(`not a valid .npz: central directory entry ${k} is damaged`);
    const flags = u16(p + 8), method = u16(p + 10), crc = u32(p + 16);
    let csize = BigInt(u32(p + 20)), usize = BigInt(u32(p + 24)), offset = BigInt(u32(p + 42));
    const nameLen = u16(p + 28), extraLen = u16(p + 30), commentLen = u16(p + 32);
    if (p + 46 + nameLen + extraLen + commentLen > cdEnd) fail(`not a valid .npz: central directory entry ${k} is damaged`);
    const name = String.fromCharCode(...bytes.subarray(p + 46, p + 46 + nameLen));
    if (name.includes('\0')) fail(`not a valid .npz: the name of central directory entry ${k} holds a NUL byte`);
    // extra fields, each inside the entry's extra area; zip64's holds the 64-bit values of the
    // 32-bit fields that are 0xffffffff, in order
    const extraEnd = p + 46 + nameLen + extraLen;
    for (let e = p + 46 + nameLen; e + 4 <= extraEnd;) {
      const id = u16(e), size = u16(e + 2);
      if (e + 4 + size > extraEnd) fail(`not a valid .npz: an extra field of ${shown(name)} runs past the end of its entry`);
      if (id === 1) {
        let q = e + 4;
        const take = () => {
          if (q + 8 > e + 4 + size) fail(`not a valid .npz: the zip64 field of ${shown(name)} is too short`);
          const x = u64(q);
          q += 8;
          return x;
        };
        if (usize === 0xffffffffn) usize = take();
        if (csize === 0xffffffffn) csize = take();
        if (offset === 0xffffffffn) offset = take();
      }
      e += 4 + size;
    }
    p += 46 + nameLen + extraLen + commentLen;
    if (flags & 1) fail(`${shown(name)}: encrypted, which .npz files never are`);
    if (method !== 0 && method !== 8) fail(`${shown(name)}: zip compression method ${method}, expected stored (np.savez) or deflated (np.savez_compressed)`);
    if (!(offset + 30n <= cdOffset) || u32(Number(offset)) !== 0x04034b50) fail(`not a valid .npz: the local header of ${shown(name)} is damaged`);
    const start = Number(offset) + 30 + u16(Number(offset) + 26) + u16(Number(offset) + 28);
    if (!(BigInt(start) + csize <= cdOffset)) fail(`not a valid .npz: the data of ${shown(name)} lies outside the file`);
    if (method === 0 && csize !== usize) fail(`not a valid .npz: ${shown(name)} is stored with ${csize} bytes but says it holds ${usize}`);
    // claims checked before anything is allocated for them: a member fits a wasm32 heap, and
    // deflate gives at most 1032 bytes per byte (258 per 2-bit match)
    if (usize > MAX_MEMBER) fail(`${shown(name)}: holds ${usize} bytes, more than the ${MAX_MEMBER} a member may (4 GiB, what WebAssembly memory can hold)`);
    if (method === 8 && usize > csize * 1032n) fail(`not a valid .npz: ${shown(name)} says it inflates to ${usize} bytes, more than its ${csize} deflated bytes can (1032 each)`);
    names.push(name);
    members.set(name, member(bytes, start, Number(csize), Number(usize), method, crc, inflateRaw));
  }
  const seen = new Set();
  for (const name of names) {
    if (seen.has(name)) fail(`not a valid .npz: ${shown(name)} appears twice`);
    seen.add(name);
  }
  return members;
}

const MAX_MEMBER = 0xffffffffn; // the most a wasm32 heap could hold

function member(bytes, start, csize, usize, method, crc, inflateRaw) {
  return {
    method: method === 0 ? 'stored' : 'deflated',
    read() {
      let data = bytes.subarray(start, start + csize);
      if (method === 8) {
        // at most one byte past the declared size is made; damaged and longer are one verdict,
        // as zlib may see damage past the declared size before it sees the size exceeded
        const damaged = () => fail(`the deflated data is damaged or longer than the ${usize} bytes the archive says`);
        try {
          data = inflateRaw(data, usize + 1);
        } catch (e) {
          if (e instanceof RangeError && e.code !== 'ERR_BUFFER_TOO_LARGE') throw e; // memory, not the data
          damaged();
        }
        if (data.length > usize) damaged();
        if (data.length !== usize) fail(`inflates to ${data.length} bytes, the archive says ${usize}`);
      }
      if (crc32(data) !== crc) fail('CRC-32 mismatch: the archive is damaged');
      return data;
    },
  };
}
