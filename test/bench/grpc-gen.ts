/**
 * The gRPC load generator, in a process of its own: `grpc-gen.ts <json GrpcLoadOptions>` runs a
 * closed loop of `inFlight` Check calls spread over `channels` HTTP/2 connections for `durationS`,
 * each call sending the same pre-encoded CheckRequest (grpc-js with identity serializers, so the
 * generator's cost is the same whatever answers). Prints one JSON line: a lib.ts LoadResult, where
 * `non2xx` counts replies whose CheckResponse status is not OK.
 */
import { credentials, makeGenericClientConstructor, Metadata, type Client, type ServiceError } from '@grpc/grpc-js';

export interface GrpcLoadOptions {
  target: string;
  /** The CheckRequest, base64. */
  request: string;
  channels: number;
  inFlight: number;
  durationS: number;
}

const id = (b: Buffer): Buffer => b;
const Raw = makeGenericClientConstructor(
  { Check: { path: '/envoy.service.auth.v3.Authorization/Check', requestStream: false, responseStream: false, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id, originalName: 'Check' } },
  'RawAuthorization',
) as unknown as new (target: string, creds: unknown, options: Record<string, unknown>) => Client & { Check(req: Buffer, md: Metadata, cb: (err: ServiceError | null, res?: Buffer) => void): void };

/** Whether a CheckResponse's status code is OK (absent or 0): read field 1 (status), then its field 1 (code). */
function isOk(res: Buffer): boolean {
  let i = 0;
  const varint = (): number => {
    let n = 0;
    let f = 1;
    for (;;) {
      const b = res[i++]!;
      n += (b & 0x7f) * f;
      if (b < 0x80) return n;
      f *= 128;
    }
  };
  while (i < res.length) {
    const tag = varint();
    if ((tag & 7) !== 2) return false;
    const len = varint();
    if (tag >>> 3 === 1) {
      const end = i + len;
      while (i < end) {
        const t = varint();
        if (t === 0x08) return varint() === 0;
        if ((t & 7) !== 2) return false;
        const skip = varint();
        i += skip;
      }
      return true;
    }
    i += len;
  }
  return true;
}

async function run(o: GrpcLoadOptions): Promise<{ rps: number; p50: number; p99: number; non2xx: number; errors: number; total: number }> {
  const request = Buffer.from(o.request, 'base64');
  // A channel per connection: each its own subchannel pool.
  const clients = Array.from({ length: o.channels }, (_, i) => new Raw(o.target, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1, 'grpc.channel_id': i }));
  const call = (c: (typeof clients)[number]): Promise<{ ok: boolean; err: boolean }> =>
    new Promise((resolve) => c.Check(request, new Metadata(), (err, res) => resolve({ ok: !err && isOk(res!), err: err !== null })));
  // Warm every connection.
  await Promise.all(clients.map((c) => call(c)));
  const latencies: number[] = [];
  let errors = 0;
  let non2xx = 0;
  const start = process.hrtime.bigint();
  const stopAt = start + BigInt(Math.round(o.durationS * 1e9));
  const loop = async (c: (typeof clients)[number]): Promise<void> => {
    while (process.hrtime.bigint() < stopAt) {
      const t = process.hrtime.bigint();
      const r = await call(c);
      latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (r.err) errors++;
      else if (!r.ok) non2xx++;
    }
  };
  await Promise.all(Array.from({ length: o.inFlight }, (_, i) => loop(clients[i % clients.length]!)));
  const elapsedS = Number(process.hrtime.bigint() - start) / 1e9;
  for (const c of clients) c.close();
  const sorted = Float64Array.from(latencies).sort();
  const q = (p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
  return { rps: latencies.length / elapsedS, p50: q(0.5), p99: q(0.99), non2xx, errors, total: latencies.length };
}

process.stdout.write(`${JSON.stringify(await run(JSON.parse(process.argv[2] ?? '{}') as GrpcLoadOptions))}\n`);
process.exit(0);
