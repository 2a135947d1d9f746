import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { AcceptedIds } from '../../src/webhooks/accepted-ids.js';
import { fingerprintInto } from '../../src/webhooks/id-fingerprint.js';

// An independent MurmurHash3 (it follows the reference C++ byte for byte), fed the UTF-16LE bytes.
const murmur = createRequire(import.meta.url)('murmurhash3js-revisited') as { x86: { hash128(bytes: Uint8Array, seed?: number): string } };

const hex = (words: Int32Array): string => Array.from(words, (w) => (w >>> 0).toString(16).padStart(8, '0')).join('');

/** A small deterministic PRNG, so a failure names its seed and replays. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('fingerprintInto (MurmurHash3 x86_128 of the UTF-16LE bytes)', () => {
  it('equals the reference implementation for every length from 0 to 70 and for non-ASCII ids', () => {
    const random = rng(7);
    const ids: string[] = [];
    for (let n = 0; n <= 70; n++) ids.push(Array.from({ length: n }, () => String.fromCharCode(33 + Math.floor(random() * 94))).join(''));
    ids.push('evt_01JD0000000000000000000000', 'événement_ü', '事件-😀-id', '\u0000\uffff\ud800', 'evt_' + 'x'.repeat(1020));
    const out = new Int32Array(4);
    for (const id of ids) {
      fingerprintInto(id, out, 0);
      expect(hex(out), JSON.stringify(id)).toBe(murmur.x86.hash128(Buffer.from(id, 'utf16le'), 0));
    }
  });
});

describe('AcceptedIds', () => {
  it('agrees with a Map model over 20,000 random adds, lookups and expiries, through growth, eviction and re-adds', () => {
    for (const seed of [1, 2, 3]) {
      const random = rng(seed);
      const bound = 300;
      const ids = new AcceptedIds(bound);
      const model = new Map<string, number>(); // insertion order = acceptance order
      let now = 1_000_000;
      const retention = 5_000;
      const trim = (): void => {
        for (const [id, at] of model) {
          if (at > now) break;
          model.delete(id);
        }
      };
      for (let step = 0; step < 20_000; step++) {
        const id = `evt_${Math.floor(random() * 1500)}`;
        const r = random();
        if (r < 0.45) {
          const expected = (model.get(id) ?? -Infinity) > now;
          expect(ids.has(id, now), `seed ${seed} step ${step} has(${id})`).toBe(expected);
        } else if (r < 0.9) {
          trim();
          model.delete(id);
          model.set(id, now + retention);
          while (model.size > bound) model.delete(model.keys().next().value!);
          ids.add(id, now + retention, now);
        } else {
          now += Math.floor(random() * 400);
        }
        if (step % 97 === 0) {
          trim();
          ids.expire(now);
          expect(ids.size, `seed ${seed} step ${step} size`).toBe(model.size);
        }
      }
      for (let k = 0; k < 1500; k++) expect(ids.has(`evt_${k}`, now)).toBe((model.get(`evt_${k}`) ?? -Infinity) > now);
    }
  });

  it('forgets the oldest first at its bound, forgets expired ids, and clear() forgets everything', () => {
    const ids = new AcceptedIds(3);
    for (const [i, id] of ['a', 'b', 'c', 'd'].entries()) ids.add(id, 1000 + i, 0);
    expect(['a', 'b', 'c', 'd'].map((id) => ids.has(id, 0))).toEqual([false, true, true, true]);
    expect(ids.has('b', 1001)).toBe(false); // its time (1001) has come
    expect(ids.has('c', 1001)).toBe(true);
    ids.expire(1002);
    expect(ids.size).toBe(1);
    ids.clear();
    expect(ids.size).toBe(0);
    expect(ids.has('d', 0)).toBe(false);
  });
});
