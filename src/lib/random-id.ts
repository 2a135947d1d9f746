import { randomFillSync } from 'node:crypto';

/** Ids made per refill: one CSPRNG read and one string for this many answers. */
const BATCH = 256;
const ID_CHARS = 36;
const HEX = Buffer.from('0123456789abcdef', 'latin1');

/**
 * Random (version 4, RFC 9562) UUIDs from the CSPRNG, made {@link BATCH} at a time: the decision
 * id every answer carries, cache hits included.
 *
 * `crypto.randomUUID` also reads its randomness in bulk, but builds each id as a rope of 20
 * pieces that the response then flattens; here a batch is formatted into one flat string and
 * each id is a slice of it (docs/performance.md, Cache hits).
 */
export class RandomIds {
  private readonly random = Buffer.allocUnsafe(16 * BATCH);
  private readonly text = Buffer.allocUnsafe(ID_CHARS * BATCH);
  private ids = '';
  private next = BATCH;

  /** The next id: 36 characters, lower-case hex, `xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`. */
  readonly id = (): string => {
    if (this.next === BATCH) this.refill();
    const at = this.next++ * ID_CHARS;
    return this.ids.slice(at, at + ID_CHARS);
  };

  private refill(): void {
    const r = randomFillSync(this.random);
    const out = this.text;
    let o = 0;
    for (let i = 0; i < BATCH; i++) {
      const base = i * 16;
      r[base + 6] = (r[base + 6]! & 0x0f) | 0x40; // version 4
      r[base + 8] = (r[base + 8]! & 0x3f) | 0x80; // variant 10xx
      for (let j = 0; j < 16; j++) {
        if (j === 4 || j === 6 || j === 8 || j === 10) out[o++] = 0x2d; // '-'
        const b = r[base + j]!;
        out[o++] = HEX[b >> 4]!;
        out[o++] = HEX[b & 15]!;
      }
    }
    this.ids = out.toString('latin1');
    this.next = 0;
  }
}
