import { constants, createServer, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DeadlineQueue } from '../../src/lib/deadline-queue.js';
import { GrpcCall, type CallLimits, type UnaryMethod } from '../../src/grpc/server-call.js';
import { UnverifiedBudget } from '../../src/webhooks/unverified-budget.js';
import { grpcFrame, h2Connect, rawCall } from '../helpers/h2-raw.js';
import { eventually } from '../helpers/wait.js';

// One call on a real node:http2 server, its method scripted: what the call does when the method
// misbehaves, and what it writes when it does not.

let server: Http2Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

async function serving(method: UnaryMethod): Promise<string> {
  const limits: CallLimits = { budget: new UnverifiedBudget(1 << 20), arrivals: new DeadlineQueue(), requestTimeoutMs: 60_000 };
  server = createServer();
  server.on('stream', (stream: ServerHttp2Stream, headers) => new GrpcCall(stream, headers, method, limits, 'p'));
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('GrpcCall', () => {
  it('a method that throws gets its stream reset (INTERNAL_ERROR), and nothing throws out of the event handler', async () => {
    const target = await serving({
      maxBytes: 1024,
      request: () => {
        throw new Error('a method bug');
      },
      refused: () => {
        throw new Error('a method bug');
      },
    });
    const h = await h2Connect(target);
    try {
      const whole = await eventually(rawCall(h, { chunks: [grpcFrame(Buffer.from('x'))] }).answer, 'the stream of a throwing method closed');
      expect([whole.httpStatus, whole.rstCode]).toEqual([0, constants.NGHTTP2_INTERNAL_ERROR]);
      const refused = await eventually(rawCall(h, { chunks: [] }).answer, 'the stream of a throwing refusal closed');
      expect(refused.rstCode).toBe(constants.NGHTTP2_INTERNAL_ERROR);
    } finally {
      h.destroy();
    }
  });

  it('one message and status OK; a server stream, its messages, then OK', async () => {
    const target = await serving({
      maxBytes: 1024,
      request: (m, call) => {
        if (m.toString() === 'stream') {
          call.open();
          call.write(Buffer.from('a'));
          call.write(Buffer.from('b'));
          call.end();
        } else call.send(Buffer.from(`echo ${m.toString()}`));
      },
      refused: (why, call) => call.send(Buffer.from(why.problem)),
    });
    const h = await h2Connect(target);
    try {
      const unary = await rawCall(h, { chunks: [grpcFrame(Buffer.from('hi'))] }).answer;
      expect([unary.httpStatus, unary.grpcStatus, unary.messages.map(String)]).toEqual([200, 0, ['echo hi']]);
      const streamed = await rawCall(h, { chunks: [grpcFrame(Buffer.from('stream'))] }).answer;
      expect([streamed.grpcStatus, streamed.messages.map(String)]).toEqual([0, ['a', 'b']]);
      const none = await rawCall(h, { chunks: [] }).answer;
      expect(none.messages.map(String)).toEqual(['no_message']);
    } finally {
      h.destroy();
    }
  });
});
