import type { IncomingMessage } from 'node:http';

export type ReadBodyResult =
  | { readonly ok: true; readonly body: Buffer }
  | { readonly ok: false; readonly reason: 'too_large' | 'aborted' };

/**
 * Reads a request body as raw bytes, never decoded (the signature covers the exact bytes). Stops
 * keeping chunks as soon as `maxBytes` is passed: the rest still flows, to nowhere, so the client can
 * read the 413 it is about to get instead of a reset.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<ReadBodyResult> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.resolve({ ok: false, reason: 'too_large' });

  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (result: ReadBodyResult): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      req.off('error', onAborted);
      // Keep the stream flowing with no listener: what is left is discarded, not buffered.
      if (!result.ok) req.on('error', () => undefined).resume();
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBytes) {
        chunks.length = 0;
        done({ ok: false, reason: 'too_large' });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => done({ ok: true, body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size) });
    const onAborted = (): void => done({ ok: false, reason: 'aborted' });
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('aborted', onAborted);
    req.on('error', onAborted);
  });
}
