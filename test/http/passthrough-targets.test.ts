import { connect } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

// Issue 20, items 1 and 5: the API key never leaves /v1. The sidecar runs in front of a real
// node:http service on loopback that records the raw request target it received (`req.url`); a
// target whose raw path is not already its own normal form, or that spells the check path any
// other way than the strict route, is refused with 400 and the service never hears of it.

const KEY = 'flow-targets';
const BODY = JSON.stringify({ userReference: 'u-1', configKey: KEY });

let upstream: ScriptedUpstream;
let sidecar: TestSidecar;

beforeAll(async () => {
  upstream = await startUpstream({ status: 200, headers: { 'cache-control': 'public, max-age=600' }, body: allow(KEY, Date.now() + 600_000) });
  sidecar = await startTestSidecar(upstream.url);
});
afterAll(async () => {
  await sidecar?.close();
  await upstream?.close();
});
beforeEach(async () => {
  await sidecar.send('DELETE', '/sidecar/cache');
  upstream.resetLog();
});

/** What a client that writes its bytes itself gets back: the sidecar is not helped by any client library. */
interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly json: Record<string, unknown> | undefined;
}

/** Sends `target` byte for byte (latin1) in a request line of its own, on a fresh connection. */
function raw(method: string, target: string, body?: string): Promise<RawAnswer> {
  const { port, hostname } = new URL(sidecar.handle.urls.decision);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(':');
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      let json: Record<string, unknown> | undefined;
      try {
        json = JSON.parse(rest.join('\r\n\r\n')) as Record<string, unknown>;
      } catch {
        json = undefined;
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, json });
    });
    const bodyBytes = body === undefined ? '' : `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`;
    socket.write(Buffer.from(`${method} ${target} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n${bodyBytes}\r\n${body ?? ''}`, 'latin1'));
  });
}

/** Nothing reached the service: in particular, never a target with the key on it. */
function serviceNeverCalled(): void {
  expect(upstream.requests.map((r) => `${r.method} ${r.url} ${r.headers.authorization ?? ''}`)).toEqual([]);
}

describe('issue 20 item 1: the key never leaves /v1 (every example of the issue, sent as is)', () => {
  it.each([
    ['/admin/../v1/foo', 'dot_segment'],
    ['/admin/..%09/v1/foo', 'control_character'],
    ['/admin/.%0a./v1/x', 'control_character'],
    ['/admin/x/../../v1/y', 'dot_segment'],
    ['/v1//../admin', 'empty_segment'],
    ['/v1/..%20/admin', 'control_character'],
  ])('GET %s → 400 rejected (%s), the service is never called', async (target, problem) => {
    const r = await raw('GET', target);
    expect(r.status).toBe(400);
    expect(r.headers['x-consent-decision-source']).toBe('rejected');
    expect(r.json).toMatchObject({ error: 'invalid_request', field: 'path', problem });
    expect(typeof r.json?.detail).toBe('string');
    serviceNeverCalled();
  });
});

describe('a raw path that is not its own normal form is refused, never sent', () => {
  it.each([
    // dot segments, literal and percent-encoded in any case
    ['/v1/./customers/c-1', 'dot_segment'],
    ['/v1/customers/../admin', 'dot_segment'],
    ['/v1/customers/c-1/..', 'dot_segment'],
    ['/v1/customers/...', 'dot_segment'],
    ['/v1/%2e%2e/admin', 'encoded_unreserved'],
    ['/v1/%2E%2E/admin', 'encoded_unreserved'],
    ['/v1/.%2e/admin', 'encoded_unreserved'],
    ['/v1/customers/%2E', 'encoded_unreserved'],
    // empty segments
    ['/v1//customers', 'empty_segment'],
    ['/v1/customers//c-1', 'empty_segment'],
    // encoded control characters and spaces
    ['/v1/customers/c%00', 'control_character'],
    ['/v1/customers/c%1f', 'control_character'],
    ['/v1/customers/c%1F', 'control_character'],
    ['/v1/customers/c%7f', 'control_character'],
    ['/v1/customers/c%20x', 'control_character'],
    ['/v1/customers/c%09', 'control_character'],
    ['/v1/customers/c%0a', 'control_character'],
    ['/v1/customers/c%0D%0A', 'control_character'],
    // encoded slashes and backslashes, literal backslashes
    ['/v1/customers/a%2fb', 'encoded_slash'],
    ['/v1/customers/a%2Fb', 'encoded_slash'],
    ['/v1/customers/a%5cb', 'encoded_slash'],
    ['/v1/customers/a%5C..%5Cadmin', 'encoded_slash'],
    ['/v1/customers/a\\b', 'backslash'],
    ['/v1/customers\\..\\..\\admin', 'backslash'],
    // anything else a server might read differently
    ['/v1/customers/a;b', 'path_parameter'],
    ['/v1/customers;jsessionid=1/c-1', 'path_parameter'],
    ['/v1/customers/a%3bb', 'path_parameter'],
    ['/v1/..%3f', 'encoded_delimiter'],
    ['/v1/customers/..%3F/admin', 'encoded_delimiter'],
    ['/v1/customers/a%23b', 'encoded_delimiter'],
    ['/v1/customers/%63-1', 'encoded_unreserved'],
    ['/%761/customers/c-1', 'encoded_unreserved'],
    ['/v1/customers/a%252e%252e', 'double_encoding'],
    ['/v1/customers/a%zz', 'invalid_escape'],
    ['/v1/customers/a%', 'invalid_escape'],
    ['/v1/customers/a%2', 'invalid_escape'],
    ['/v1/customers/a#/../../admin', 'fragment'],
    ['/v1/customers/%c3%28', 'invalid_utf8'],
    ['/v1/customers/%ef%bc%8f..%ef%bc%8fadmin', 'compatibility_character'],
    ['/v1/customers/%EF%BC%8E%EF%BC%8E', 'compatibility_character'],
    ['/v1/customers/a"b', 'invalid_character'],
    ['/v1/customers/a<b>', 'invalid_character'],
    ['/v1/customers/a{b}', 'invalid_character'],
    ['/v1/customers/a`b', 'invalid_character'],
    ['/V1/customers/c-1', 'not_v1'],
    ['/v1%2fcustomers', 'encoded_slash'],
  ])('GET %s → 400 (%s)', async (target, problem) => {
    const r = await raw('GET', target);
    expect([target, r.status, r.headers['x-consent-decision-source']]).toEqual([target, 400, 'rejected']);
    expect(r.json).toMatchObject({ decision: 'DENY', error: 'invalid_request', field: 'path', problem });
    serviceNeverCalled();
  });

  it.each([
    ['a literal tab', '/v1/customers/a\tb'],
    ['a literal control character', '/v1/customers/a\x01b'],
    ['a literal DEL', '/v1/customers/a\x7fb'],
    ['a literal NUL', '/v1/customers/a\x00b'],
    ['a raw byte above 0x7f', '/v1/customers/\xc3\xa5lice'],
    ['a literal space', '/v1/customers/a b'],
  ])('%s in the target → 400 rejected with a JSON error, the service is never called', async (_name, target) => {
    const r = await raw('GET', target);
    expect(r.status).toBe(400);
    expect(r.headers['x-consent-decision-source']).toBe('rejected');
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.json).toMatchObject({ decision: 'DENY', error: 'invalid_request' });
    serviceNeverCalled();
  });

  it.each([
    '/v1/customers/c-42/consent-compliance?template=t1&x=%20y',
    '/v1/customers/%C3%A5lice/consent-compliance',
    '/v1/customers/a|b/consent-compliance',
    '/v1/customers/50%25off',
    '/v1/customers/a%2Cb:c@d',
    '/v1/redec/consents/rc-9/notification-evidence',
    '/v1/customers/c-1/',
    '/v1/customers/c.1/x..y',
    '/v1/customers/c-1?next=/../../admin&q=a;b',
  ])('%s is already its own normal form: it reaches the service exactly as written, with the key', async (target) => {
    const r = await raw('GET', target);
    expect(r.status).toBe(200);
    expect(r.headers['x-consent-decision-source']).toBe('upstream');
    expect(upstream.requests.map((q) => [q.url, q.headers.authorization])).toEqual([[target, 'Bearer test-api-key']]);
  });
});

describe('issue 20 item 5: no spelling of the check path passes through', () => {
  it.each([
    '/v1/authorization/check.',
    '/v1/authorization/check..',
    '/v1/authorization/check.json',
    '/v1/authorization/check;x',
    '/v1/authorization/check%ef%bc%8f',
    '/v1/authorization/check%EF%BC%8F',
    '/v1/authorization/checks',
    '/v1/authorization/check/x',
    '/v1/authorization/check-v2',
    '/v1/authorization/CHECK.json',
    '/v1/Authorization/Check.',
    '/v1/authorization/%63heck.',
    '/v1/authorization/check%2ejson',
    '/v1/authorization/check%00',
    '/v1/authorization/check%20',
    '/v1/authorization/check%09',
    '/v1/authoriz%09ation/check',
    '/v1/authorization/check%0d%0a',
    '/v1/authorization/%EF%BD%83heck',
    '/v1/authorization/check%C2%A0',
  ])('POST %s → 400 rejected: neither passed through nor decided', async (target) => {
    const r = await raw('POST', target, BODY);
    expect([target, r.status, r.headers['x-consent-decision-source']]).toEqual([target, 400, 'rejected']);
    expect(r.json).toMatchObject({ decision: 'DENY', error: 'invalid_request' });
    serviceNeverCalled();
  });

  // Spellings whose canonical form is the check path are answered by the strict route, which asks
  // the service on the exact path and parses its answer strictly (passthrough-routes.test.ts).
  it.each([
    '/v1/authorization/check',
    '/v1/authorization/check/',
    '/v1/authorization/%63heck',
    '/V1/AUTHORIZATION/CHECK',
    '/v1/authorization/check?x=1',
    '/v1/authorization/check%3f',
    '/v1/authorization/check%23',
    '/v1/authorization/check%2f.',
  ])(
    'POST %s is the strict check route: the service is asked on the exact check path',
    async (target) => {
      const r = await raw('POST', target, BODY);
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ decision: 'ALLOW', configKey: KEY });
      expect(upstream.requests.map((q) => q.url)).toEqual(['/v1/authorization/check']);
    },
  );
});

describe('issue 20 item 6: passthrough answers carry cache-control: no-store', () => {
  it("replaces the service's own cache-control (a single-use authorize said public, max-age=600)", async () => {
    const r = await sidecar.send('POST', '/v1/redec/accesses/authorize', { body: '{"accessId":"a-1"}' });
    expect(r.status).toBe(200);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(upstream.requests.map((q) => q.url)).toEqual(['/v1/redec/accesses/authorize']);
  });

  it('without a cache-control from the service too, and on the 502 of a service that does not answer', async () => {
    upstream.enqueue({ status: 201, body: 'x' }, { fault: 'reset' });
    const a = await sidecar.send('GET', '/v1/customers/c-1');
    expect([a.status, a.headers['cache-control']]).toEqual([201, 'no-store']);
    const b = await sidecar.send('GET', '/v1/customers/c-1');
    expect([b.status, b.headers['cache-control']]).toEqual([502, 'no-store']);
  });
});
