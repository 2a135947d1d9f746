/**
 * Streams that hold unfinished CheckRequests on the gRPC listener: each declares a message of
 * `declared` bytes, sends `push` of them and never ends. Run as a process of its own
 * ({@link startGrpcHold}), it reports on stdout when every stream is settled (pushed all it meant
 * to, answered, or reset), then holds until it is stopped.
 *
 * Child: `node --import tsx test/bench/grpc-hold.ts --load '{"target":…}'`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface GrpcHoldOptions {
  /** `127.0.0.1:port` */
  readonly target: string;
  readonly connections: number;
  readonly streamsPerConnection: number;
  /** The length each message declares (bytes). */
  readonly declared: number;
  /** Bytes of it each stream sends before it holds. */
  readonly push: number;
}

/** How the streams ended up once settled: `held` pushed everything and waits; `answered` got a response; `reset` was cut. */
export type HoldOutcome = Record<'held' | 'answered' | 'reset', number>;

export interface GrpcHold {
  /** Resolves once every stream is settled, with how. */
  readonly settled: Promise<HoldOutcome>;
  stop(): void;
}

/** Starts the hold in a process of its own. */
export function startGrpcHold(o: GrpcHoldOptions): GrpcHold {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', SELF, '--load', JSON.stringify(o)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const settled = new Promise<HoldOutcome>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n').find((l) => l.startsWith('settled '));
      if (line) resolve(JSON.parse(line.slice('settled '.length)) as HoldOutcome);
    });
    child.once('exit', (code) => reject(new Error(`grpc hold exited ${code} before it settled: ${out}`)));
  });
  settled.catch(() => undefined);
  return { settled, stop: () => void child.kill('SIGKILL') };
}

/** Resolves on the stream's next 'drain' or its 'close', whichever comes first, leaving no listener behind. */
function drainOrClose(stream: ClientHttp2Stream): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off('drain', done);
      stream.off('close', done);
      resolve();
    };
    stream.once('drain', done);
    stream.once('close', done);
  });
}

async function load(o: GrpcHoldOptions): Promise<void> {
  const outcome: HoldOutcome = { held: 0, answered: 0, reset: 0 };
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  const streams: Promise<void>[] = [];
  const sessions: ClientHttp2Session[] = [];
  for (let c = 0; c < o.connections; c++) {
    const session = connect(`http://${o.target}`);
    session.on('error', () => undefined);
    sessions.push(session);
    for (let s = 0; s < o.streamsPerConnection; s++) {
      const stream: ClientHttp2Stream = session.request({ ':method': 'POST', ':path': '/envoy.service.auth.v3.Authorization/Check', 'content-type': 'application/grpc', te: 'trailers' });
      streams.push(
        new Promise<void>((resolve) => {
          let settled = false;
          const settle = (how: keyof HoldOutcome): void => {
            if (settled) return;
            settled = true;
            outcome[how]++;
            resolve();
          };
          stream.on('error', () => undefined);
          stream.on('response', () => settle('answered'));
          stream.on('close', () => settle('reset'));
          void (async () => {
            const prefix = Buffer.alloc(5);
            prefix.writeUInt32BE(o.declared, 1);
            stream.write(prefix);
            for (let sent = 0; sent < o.push && !stream.closed && !settled; sent += chunk.length) {
              const n = Math.min(chunk.length, o.push - sent);
              if (!stream.write(n === chunk.length ? chunk : chunk.subarray(0, n))) await drainOrClose(stream);
            }
            // Everything meant was sent (the last write may still sit in flow control): held.
            if (!stream.closed) settle('held');
          })();
        }),
      );
    }
  }
  await Promise.all(streams);
  process.stdout.write(`settled ${JSON.stringify(outcome)}\n`);
  // Hold until killed.
  setInterval(() => undefined, 1 << 30);
}

if (process.argv[2] === '--load') void load(JSON.parse(process.argv[3]!) as GrpcHoldOptions);
