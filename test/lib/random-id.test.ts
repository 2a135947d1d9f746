import { describe, expect, it } from 'vitest';
import { RandomIds } from '../../src/lib/random-id.js';

// RFC 9562 §5.4: version 4 in the 13th hex digit, variant 10xx in the 17th.
const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('RandomIds', () => {
  it('makes version 4 UUIDs, across several refills', () => {
    const next = new RandomIds().id;
    for (let i = 0; i < 2000; i++) expect(next()).toMatch(V4);
  });

  it('never repeats an id, within a batch or across refills and generators', () => {
    const a = new RandomIds().id;
    const b = new RandomIds().id;
    const seen = new Set<string>();
    for (let i = 0; i < 5000; i++) {
      seen.add(a());
      seen.add(b());
    }
    expect(seen.size).toBe(10_000);
  });

  it('spreads every random hex digit over all 16 values, and the variant digit over its 4', () => {
    const next = new RandomIds().id;
    const ids = Array.from({ length: 4000 }, next);
    for (let pos = 0; pos < 36; pos++) {
      const values = new Set(ids.map((id) => id[pos]));
      if ([8, 13, 18, 23].includes(pos)) expect(values).toEqual(new Set(['-']));
      else if (pos === 14) expect(values).toEqual(new Set(['4']));
      else if (pos === 19) expect(values).toEqual(new Set(['8', '9', 'a', 'b']));
      // 4000 draws of 16 equally likely values: a value missing has odds of about 16 × (15/16)^4000.
      else expect(values.size, `hex digit ${pos}`).toBe(16);
    }
  });
});
