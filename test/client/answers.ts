import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { chunked, response, type Script } from '../helpers/hostile-sidecar.js';

/** Generation's "now": every future `validUntil` is at least an hour after it, every past one before it. */
export const T0 = Date.now();
const HOUR = 3_600_000;

/** One generated answer and what it is: `allow` is set only for a valid ALLOW (the client must report exactly it). */
export interface Case {
  readonly family: string;
  readonly configKey: string;
  readonly script: Script;
  readonly allow?: { readonly validUntil: number; readonly decisionId?: string };
}

/** A JSON object as its members' raw texts, so a body can be anything JSON.stringify would never write. */
type Members = (readonly [string, string])[];
const q = (s: string): string => JSON.stringify(s);
const render = (m: Members, sp = ''): string => `{${sp}${m.map(([n, v]) => `${n}${sp}:${sp}${v}`).join(`${sp},${sp}`)}${sp}}`;
/** Every UTF-16 unit as a `\uXXXX` escape: the same string to JSON.parse, other bytes on the wire. */
const escaped = (s: string): string => `"${[...Array(s.length).keys()].map((i) => `\\u${s.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')}"`;

export const configKeyArb = fc.oneof(
  fc.constantFrom('marketing-email', 'é-clé', 'k"\\/', 'ключ', '\u2028x', 'a b'),
  fc.string({ minLength: 1, maxLength: 24 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }),
);
const futureArb = fc.oneof({ weight: 5, arbitrary: fc.integer({ min: T0 + HOUR, max: T0 + 20 * 365 * 24 * HOUR }) }, { weight: 1, arbitrary: fc.constant(Number.MAX_SAFE_INTEGER) });
const idArb = fc.option(fc.stringMatching(/^[\x21-\x7e]{1,40}$/), { nil: undefined });
const GOOD_TYPES = ['application/json', 'application/json; charset=utf-8', 'Application/JSON', 'application/json;charset=UTF-8'] as const;

interface Parts {
  status: number;
  headers: (readonly [string, string])[];
  body: Buffer;
  framing: 'length' | 'chunked' | 'close';
  cuts: number[];
}
function script(p: Parts): Script {
  if (p.framing === 'length') return { bytes: response(p.status, p.headers, p.body), then: 'keep' };
  if (p.framing === 'chunked') return { bytes: Buffer.concat([response(p.status, [...p.headers, ['transfer-encoding', 'chunked']], '', { length: false }), chunked(p.body, p.cuts)]), then: 'keep' };
  return { bytes: response(p.status, [...p.headers, ['connection', 'close']], p.body, { length: false }), then: 'end' };
}

/** A valid ALLOW for its configKey, in any of the ways a correct answer can be written. */
export const validAllowArb = fc
  .record({
    configKey: configKeyArb,
    validUntil: futureArb,
    decisionId: idArb,
    order: fc.constantFrom([0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]),
    space: fc.constantFrom('', ' ', '\n', '\t ', '\r\n  '),
    escapeKey: fc.boolean(),
    escapeName: fc.boolean(),
    type: fc.constantFrom(...GOOD_TYPES),
    framing: fc.constantFrom('length', 'chunked', 'close') as fc.Arbitrary<Parts['framing']>,
    cuts: fc.array(fc.nat(120), { maxLength: 4 }),
  })
  .map((r) => {
    const members: Members = [
      [r.escapeName ? '"decisio\\u006e"' : '"decision"', '"ALLOW"'],
      ['"configKey"', r.escapeKey ? escaped(r.configKey) : q(r.configKey)],
      ['"validUntil"', String(r.validUntil)],
    ];
    const headers: (readonly [string, string])[] = [['content-type', r.type], ['x-consent-decision-source', 'upstream']];
    if (r.decisionId !== undefined) headers.push(['x-consent-decision-id', r.decisionId]);
    const parts: Parts = { status: 200, headers, body: Buffer.from(render(r.order.map((i) => members[i]!), r.space)), framing: r.framing, cuts: r.cuts };
    return { configKey: r.configKey, validUntil: r.validUntil, decisionId: r.decisionId, members, parts };
  });

export const allowCaseArb: fc.Arbitrary<Case> = validAllowArb.map((v) => ({
  family: 'valid_allow',
  configKey: v.configKey,
  script: script(v.parts),
  allow: { validUntil: v.validUntil, ...(v.decisionId === undefined ? {} : { decisionId: v.decisionId }) },
}));

type Base = fc.Arbitrary<{ configKey: string; validUntil: number; members: Members; parts: Parts }>;
const variant = (family: string, edit: (v: fc.Arbitrary<Members>) => fc.Arbitrary<Members>): fc.Arbitrary<Case> =>
  validAllowArb.chain((v) => edit(fc.constant(v.members)).map((m) => ({ family, configKey: v.configKey, script: script({ ...v.parts, body: Buffer.from(render(m)) }) })));
const otherJson = fc.oneof(fc.constantFrom('null', 'true', '1', '"x"', '[]', '{}', '1.5', '-1'), fc.json({ maxDepth: 1 }));

/** Answers that are not a valid ALLOW, each family broken in one way. */
export function brokenCaseArb(): fc.Arbitrary<Case> {
  const base: Base = validAllowArb;
  const withParts = (family: string, edit: (p: Parts, v: { configKey: string; members: Members }) => fc.Arbitrary<Parts>): fc.Arbitrary<Case> =>
    base.chain((v) => edit(v.parts, v).map((p) => ({ family, configKey: v.configKey, script: script(p) })));
  const raw = (family: string, make: (p: Parts) => fc.Arbitrary<Script>): fc.Arbitrary<Case> => base.chain((v) => make(v.parts).map((s) => ({ family, configKey: v.configKey, script: s })));

  return fc.oneof(
    withParts('status', (p) =>
      fc.constantFrom(201, 202, 203, 206, 226, 299, 300, 301, 302, 303, 307, 308, 400, 401, 403, 404, 405, 409, 418, 422, 429, 500, 501, 502, 503, 504, 599).map((status) => ({
        ...p,
        status,
        headers: status >= 300 && status < 400 ? [...p.headers, ['location', '/v1/authorization/check']] : p.headers,
      })),
    ),
    withParts('no_content', (p) => fc.constantFrom(204, 304).map((status) => ({ ...p, status, body: Buffer.alloc(0), framing: 'length' }))),
    variant('decision', (m) =>
      m.chain((ms) => fc.constantFrom('"allow"', '"Allow"', '"ALLOWED"', '" ALLOW"', '"ALLOW "', '"DENY"', '""', '"ALLOW\\u0000"', 'true', '1', 'null', '["ALLOW"]', '{"v":"ALLOW"}', 'REMOVE').map((d) => (d === 'REMOVE' ? ms.slice(1) : [[ms[0]![0], d] as const, ...ms.slice(1)]))),
    ),
    base.chain((v) =>
      fc.oneof(fc.constantFrom('""', '1', 'null', 'true', `[${q(v.configKey)}]`, `{"k":${q(v.configKey)}}`, 'REMOVE'), fc.string().filter((s) => s !== v.configKey).map(q), fc.constant(q(`${v.configKey}x`)), fc.constant(q(` ${v.configKey}`))).map((k) => ({
        family: 'config_key',
        configKey: v.configKey,
        script: script({ ...v.parts, body: Buffer.from(render(k === 'REMOVE' ? [v.members[0]!, v.members[2]!] : [v.members[0]!, ['"configKey"', k], v.members[2]!])) }),
      })),
    ),
    base.chain((v) =>
      fc
        .oneof(
          fc.constantFrom('null', 'true', '""', '0', '-1', '1e400', '9007199254740993', '1e21', '[1]', '{}', 'REMOVE'),
          fc.integer({ min: T0 + HOUR, max: T0 + 1000 * HOUR }).map((n) => [q(String(n)), `${n}.5`, `-${n}`]).chain((xs) => fc.constantFrom(...xs)),
          fc.integer({ min: 1, max: T0 - 1 }).map(String),
        )
        .map((u) => ({ family: 'valid_until', configKey: v.configKey, script: script({ ...v.parts, body: Buffer.from(render(u === 'REMOVE' ? v.members.slice(0, 2) : [...v.members.slice(0, 2), ['"validUntil"', u]])) }) })),
    ),
    variant('extra_member', (m) =>
      fc
        .tuple(m, fc.oneof(fc.constantFrom('"reason"', '"error"', '"field"', '"detail"', '"source"', '"decisionId"'), fc.string({ minLength: 1, maxLength: 8 }).filter((s) => !['decision', 'configKey', 'validUntil'].includes(s)).map(q)), otherJson, fc.nat(3))
        .map(([ms, name, value, at]) => [...ms.slice(0, at), [name, value] as const, ...ms.slice(at)]),
    ),
    variant('duplicate_member', (m) =>
      fc.tuple(m, fc.nat(2), fc.constantFrom('same', 'deny', 'escaped'), fc.nat(4)).map(([ms, which, how, at]) => {
        const [name, value] = ms[which]!;
        const twin = how === 'escaped' ? (['"\\u0064ecision"', '"DENY"'] as const) : how === 'deny' && which === 0 ? ([name, '"DENY"'] as const) : ([name, value] as const);
        return [...ms.slice(0, at), twin, ...ms.slice(at)];
      }),
    ),
    withParts('structure', (p, v) => {
      const text = render(v.members);
      return fc
        .constantFrom(`[${text}]`, `${text}${text}`, `${text}x`, `${text},`, `{"result":${text}}`, q(text), 'null', '1', `\uFEFF${text}`, text.slice(0, -1), `${text.slice(0, -1)},}`)
        .map((b) => ({ ...p, body: Buffer.from(b) }));
    }),
    withParts('content_type', (p) =>
      fc.constantFrom('text/plain', 'application/jsonx', 'application/problem+json', 'text/json', 'application/octet-stream', 'json', '', 'NONE').map((t) => ({
        ...p,
        headers: [...p.headers.filter(([n]) => n !== 'content-type'), ...(t === 'NONE' ? [] : [['content-type', t] as const])],
      })),
    ),
    withParts('bytes', (p, v) =>
      fc.constantFrom('ff', 'c0af', 'ed a0 80', 'gzip', 'utf16').map((kind) => {
        const text = render(v.members);
        if (kind === 'gzip') return { ...p, headers: [...p.headers, ['content-encoding', 'gzip']], body: gzipSync(text) };
        if (kind === 'utf16') return { ...p, body: Buffer.from(text, 'utf16le') };
        const at = text.indexOf('"configKey"') + 13;
        return { ...p, body: Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from(kind.replace(/ /g, ''), 'hex'), Buffer.from(text.slice(at))]) };
      }),
    ),
    raw('framing', (p) =>
      fc.constantFrom('truncated', 'unterminated_chunks', 'reset', 'reset_in_head', 'short_length', 'not_http', 'bad_header', 'oversized', 'oversized_chunked', 'two_lengths').chain((kind) =>
        fc.nat(p.body.length - 1).map((cut): Script => {
          const whole = response(p.status, p.headers, p.body);
          const headEnd = whole.indexOf('\r\n\r\n') + 4;
          const pad = Buffer.concat([Buffer.alloc(70_000, 0x20), p.body]);
          switch (kind) {
            case 'truncated':
              return { bytes: whole.subarray(0, headEnd + cut), then: 'destroy' };
            case 'unterminated_chunks':
              return { bytes: Buffer.concat([response(200, [...p.headers, ['transfer-encoding', 'chunked']], '', { length: false }), chunked(p.body, [cut], false)]), then: 'destroy' };
            case 'reset':
              return { bytes: Buffer.alloc(0), then: 'destroy' };
            case 'reset_in_head':
              return { bytes: whole.subarray(0, Math.max(1, Math.min(cut, headEnd - 2))), then: 'destroy' };
            case 'short_length':
              return { bytes: Buffer.concat([response(200, p.headers, '', { length: false }).subarray(0, -2), Buffer.from(`content-length: ${cut}\r\n\r\n`), p.body]), then: 'destroy' };
            case 'not_http':
              return { bytes: Buffer.concat([Buffer.from('ALLOW\r\n\r\n'), p.body]), then: 'destroy' };
            case 'bad_header':
              return { bytes: Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nbad header line\r\ncontent-type: application/json\r\n'), whole.subarray(whole.indexOf('\r\n') + 2)]), then: 'destroy' };
            case 'oversized':
              return { bytes: response(200, p.headers, pad), then: 'keep' };
            case 'oversized_chunked':
              return { bytes: Buffer.concat([response(200, [...p.headers, ['transfer-encoding', 'chunked']], '', { length: false }), chunked(pad, [1000, 40_000, 66_000])]), then: 'keep' };
            case 'two_lengths':
              return { bytes: Buffer.concat([response(200, [...p.headers, ['content-length', String(p.body.length + 1)]], p.body)]), then: 'destroy' };
          }
        }),
      ),
    ),
    base.chain((v) =>
      fc
        .oneof(fc.json({ maxDepth: 3 }), fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')))
        .filter((t) => !t.includes('ALLOW'))
        .map((t) => ({ family: 'junk', configKey: v.configKey, script: script({ ...v.parts, body: Buffer.from(t, 'latin1') }) })),
    ),
  );
}
