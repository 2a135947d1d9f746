import { describe, expect, it } from 'vitest';
import { createLogger, silentLogger } from '../../src/observability/logger.js';
import type { LogLevel } from '../../src/observability/log-levels.js';

/** A logger writing into an array of parsed lines, with the raw lines beside. */
function capture(level: LogLevel = 'trace') {
  const raw: string[] = [];
  const logger = createLogger(level, { write: (line: string) => void raw.push(line) });
  return { logger, raw, lines: () => raw.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('the JSON logger', () => {
  it('writes one JSON line per call: level by name, ISO time, service, fields, msg', () => {
    const { logger, raw, lines } = capture('info');
    logger.info({ event: 'started', port: 7700 }, 'listening');
    logger.warn('no fields');
    expect(raw.every((l) => l.endsWith('}\n') && !l.slice(0, -1).includes('\n'))).toBe(true);
    const [a, b] = lines();
    expect(a).toEqual({ level: 'info', time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), service: 'consent-sidecar', event: 'started', port: 7700, msg: 'listening' });
    expect(Date.parse(a!.time as string)).toBeGreaterThan(Date.now() - 60_000);
    expect(b).toMatchObject({ level: 'warn', msg: 'no fields' });
    expect(Object.keys(b!)).not.toContain('event');
  });

  it('writes what its level allows and nothing below it', () => {
    const { logger, lines } = capture('warn');
    logger.trace({ n: 1 }, 'trace');
    logger.debug({ n: 2 }, 'debug');
    logger.info({ n: 3 }, 'info');
    logger.warn({ n: 4 }, 'warn');
    logger.error({ n: 5 }, 'error');
    logger.fatal({ n: 6 }, 'fatal');
    expect(lines().map((l) => l.level)).toEqual(['warn', 'error', 'fatal']);
    expect(logger.isLevelEnabled('info')).toBe(false);
    expect(logger.isLevelEnabled('error')).toBe(true);
    const silent = capture('silent');
    silent.logger.fatal('nothing');
    expect(silent.raw).toEqual([]);
    expect(silentLogger().isLevelEnabled('fatal')).toBe(false);
  });

  it('a child carries its bindings on every line, after the parent\'s, at the parent\'s level', () => {
    const { logger, lines } = capture('info');
    const child = logger.child({ component: 'redec-reconciler' }).child({ shard: 2 });
    child.debug('dropped');
    child.info({ event: 'x' }, 'kept');
    expect(lines()).toEqual([expect.objectContaining({ service: 'consent-sidecar', component: 'redec-reconciler', shard: 2, event: 'x', msg: 'kept' })]);
    expect(createLogger('info', { write: () => undefined }, { service: 'consent-service-simulator' }).child({}).level).toBe('info');
  });

  it('censors credentials wherever a caller puts them, at the top or one level down, and leaves the caller\'s object alone', () => {
    const { logger, raw, lines } = capture();
    const headers = { authorization: 'Bearer sk_live_abc', 'X-Service-Signature': 't=1,v1=deadbeef', 'content-type': 'application/json' };
    logger.info({ apiKey: 'sk_live_abc', secret: 's3cr3t', secrets: ['a'], signature: 'v1=beef', authorization: 'Basic xyz', userReference: 'alice@example.com', headers, req: { authorization: 'Bearer t' } }, 'oops');
    const [line] = lines();
    for (const k of ['apiKey', 'secret', 'secrets', 'signature', 'authorization', 'userReference']) expect(line![k], k).toBe('[redacted]');
    expect(line!.headers).toEqual({ authorization: '[redacted]', 'X-Service-Signature': '[redacted]', 'content-type': 'application/json' });
    expect(line!.req).toEqual({ authorization: '[redacted]' });
    for (const secret of ['sk_live_abc', 's3cr3t', 'deadbeef', 'alice@example.com', 'Basic xyz', 'Bearer t']) expect(raw[0]).not.toContain(secret);
    expect(headers.authorization).toBe('Bearer sk_live_abc');
    // In a child's bindings too.
    const child = capture();
    child.logger.child({ apiKey: 'sk_live_child' }).info('x');
    expect(child.raw[0]).not.toContain('sk_live_child');
  });

  it('writes an error as its type, message, stack, code and cause, in any field or given alone', () => {
    const { logger, lines } = capture();
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
    const err = new TypeError('the store failed', { cause });
    logger.error({ event: 'fail_closed', err }, 'failed');
    logger.error(err);
    const [a, b] = lines();
    expect(a!.err).toEqual({
      type: 'TypeError',
      message: 'the store failed',
      stack: expect.stringContaining('TypeError: the store failed'),
      cause: { type: 'Error', message: 'connect ECONNREFUSED 127.0.0.1:6379', stack: expect.stringContaining('ECONNREFUSED'), code: 'ECONNREFUSED' },
    });
    expect(b).toMatchObject({ level: 'error', msg: 'the store failed', err: { type: 'TypeError' } });
  });

  it('never throws on what JSON cannot take: a cycle, a BigInt', () => {
    const { logger, lines } = capture();
    const cyclic: Record<string, unknown> = { name: 'a' };
    cyclic.self = cyclic;
    logger.info({ cyclic, big: 2n ** 70n }, 'odd values');
    const [line] = lines();
    expect(line).toMatchObject({ cyclic: { name: 'a', self: '[Circular]' }, big: '1180591620717411303424', msg: 'odd values' });
  });
});

describe('the JSON logger, odd callers', () => {
  it('an AggregateError keeps each error (a dual-stack connect names each address)', () => {
    const { logger, lines } = capture();
    const v4 = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8080'), { code: 'ECONNREFUSED' });
    const v6 = Object.assign(new Error('connect ECONNREFUSED ::1:8080'), { code: 'ECONNREFUSED' });
    logger.warn({ err: Object.assign(new AggregateError([v4, v6], ''), { code: 'ECONNREFUSED' }) }, 'app down');
    const err = lines()[0]!.err as Record<string, unknown>;
    expect(err).toMatchObject({ type: 'AggregateError', code: 'ECONNREFUSED' });
    expect(err.aggregateErrors).toEqual([expect.objectContaining({ message: 'connect ECONNREFUSED 127.0.0.1:8080' }), expect.objectContaining({ message: 'connect ECONNREFUSED ::1:8080' })]);
  });

  it('never throws into its caller: a cause with no prototype, a null or a number for fields', () => {
    const { logger, lines } = capture();
    const odd = new Error('odd cause', { cause: Object.create(null) as object });
    const unprintable = new Error('unprintable cause', { cause: { toString: () => { throw new Error('no'); } } });
    expect(() => logger.error({ err: odd }, 'a')).not.toThrow();
    expect(() => logger.error({ err: unprintable }, 'b')).not.toThrow();
    expect(() => (logger.info as (x: unknown, m?: string) => void)(null, 'c')).not.toThrow();
    expect(() => (logger.info as (x: unknown, m?: string) => void)(42, 'd')).not.toThrow();
    expect(lines().map((l) => l.msg)).toEqual(['a', 'b', 'c', 'd']);
    expect(lines().slice(0, 2).map((l) => (l.err as { cause: unknown }).cause)).toEqual(['[unprintable]', '[unprintable]']);
  });
});
