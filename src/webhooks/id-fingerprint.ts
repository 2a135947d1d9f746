/**
 * MurmurHash3 x86_128 of a string's UTF-16LE bytes (seed 0), read straight from its code units
 * (no Buffer): the identity under which the memory dedup store remembers an accepted event id.
 *
 * 128 bits, so two of the store's million ids share a fingerprint with probability about
 * n² / 2¹²⁹ ≈ 10⁻²⁷: never, in practice. Not a cryptographic hash, and it need not be: only ids of
 * deliveries whose signature verified are ever fingerprinted, so nobody but the service chooses them.
 *
 * Writes the four 32-bit words into `out[at..at+3]` (h1..h4: the reference's hex output is these, in
 * order, as 8 hex digits each).
 */
export function fingerprintInto(s: string, out: Int32Array, at: number): void {
  const n = s.length;
  let h1 = 0;
  let h2 = 0;
  let h3 = 0;
  let h4 = 0;
  const blocks = n >>> 3; // 8 code units = 16 bytes
  let i = 0;
  for (let b = 0; b < blocks; b++, i += 8) {
    let k1 = s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16);
    let k2 = s.charCodeAt(i + 2) | (s.charCodeAt(i + 3) << 16);
    let k3 = s.charCodeAt(i + 4) | (s.charCodeAt(i + 5) << 16);
    let k4 = s.charCodeAt(i + 6) | (s.charCodeAt(i + 7) << 16);

    k1 = Math.imul(rotl(Math.imul(k1, C1), 15), C2);
    h1 ^= k1;
    h1 = (Math.imul(rotl(h1, 19) + h2, 5) + 0x561ccd1b) | 0;
    k2 = Math.imul(rotl(Math.imul(k2, C2), 16), C3);
    h2 ^= k2;
    h2 = (Math.imul(rotl(h2, 17) + h3, 5) + 0x0bcaa747) | 0;
    k3 = Math.imul(rotl(Math.imul(k3, C3), 17), C4);
    h3 ^= k3;
    h3 = (Math.imul(rotl(h3, 15) + h4, 5) + 0x96cd1c35) | 0;
    k4 = Math.imul(rotl(Math.imul(k4, C4), 18), C1);
    h4 ^= k4;
    h4 = (Math.imul(rotl(h4, 13) + h1, 5) + 0x32ac3b17) | 0;
  }

  // The tail: 0 to 7 code units, packed two to a word as the reference reads its bytes. A code
  // unit past the end reads as NaN, which every bitwise operator takes as 0: the reference's zeros.
  const r = n - i;
  if (r > 6) h4 ^= Math.imul(rotl(Math.imul(s.charCodeAt(i + 6), C4), 18), C1);
  if (r > 4) h3 ^= Math.imul(rotl(Math.imul(s.charCodeAt(i + 4) | (s.charCodeAt(i + 5) << 16), C3), 17), C4);
  if (r > 2) h2 ^= Math.imul(rotl(Math.imul(s.charCodeAt(i + 2) | (s.charCodeAt(i + 3) << 16), C2), 16), C3);
  if (r > 0) h1 ^= Math.imul(rotl(Math.imul(s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16), C1), 15), C2);

  const len = n * 2;
  h1 ^= len;
  h2 ^= len;
  h3 ^= len;
  h4 ^= len;
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  h1 = fmix32(h1);
  h2 = fmix32(h2);
  h3 = fmix32(h3);
  h4 = fmix32(h4);
  h1 = (h1 + h2 + h3 + h4) | 0;
  out[at] = h1;
  out[at + 1] = (h2 + h1) | 0;
  out[at + 2] = (h3 + h1) | 0;
  out[at + 3] = (h4 + h1) | 0;
}

const C1 = 0x239b961b;
const C2 = 0xab0e9789 | 0;
const C3 = 0x38b34ae5;
const C4 = 0xa1e38b93 | 0;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}
