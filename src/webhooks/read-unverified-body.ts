import type { IncomingMessage } from 'node:http';
import type { UnverifiedBudget } from './unverified-budget.js';
import type { BodyVerifier, VerifyResult } from './verify.js';

export type UnverifiedBodyResult =
  | { readonly ok: true; readonly body: Buffer; readonly verified: VerifyResult }
  | { readonly ok: false; readonly reason: 'too_large' | 'over_budget' | 'body_timeout' | 'aborted' };

export interface ReadUnverifiedOptions {
  /** Largest body accepted (`--webhook-max-body-bytes`); beyond, `too_large`. */
  readonly maxBytes: number;
  /** Shared by every connection (`--webhook-max-unverified-bytes`); beyond, `over_budget`. */
  readonly budget: UnverifiedBudget;
  /** Time the whole body has to arrive (`--webhook-body-timeout-ms`); beyond, `body_timeout`. */
  readonly timeoutMs: number;
  /** Fed every chunk as it arrives: the HMAC is computed incrementally, never over a joined copy. */
  readonly verifier: BodyVerifier;
}

/**
 * Reads the raw body of a delivery whose headers passed but whose signature is not verified yet.
 * Every byte held is taken from the shared budget first (a declared `content-length` is taken at
 * once, so a delivery that cannot fit is refused before a byte is read) and given back as soon as
 * the verdict is known or the read fails. On failure the chunks are dropped at once; with
 * `too_large` the rest of the body still flows, to nowhere, so the client can read its 413.
 */
export function readUnverifiedBody(req: IncomingMessage, o: ReadUnverifiedOptions): Promise<UnverifiedBodyResult> {
  const declared = req.headers['content-length'] === undefined ? Number.NaN : Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > o.maxBytes) return Promise.resolve({ ok: false, reason: 'too_large' });
  let taken = 0;
  if (Number.isFinite(declared)) {
    if (!o.budget.tryTake(declared)) return Promise.resolve({ ok: false, reason: 'over_budget' });
    taken = declared;
  }

  return new Promise((resolve, reject) => {
    let chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const done = (result: UnverifiedBodyResult | (() => UnverifiedBodyResult)): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      req.off('error', onAborted);
      let r: UnverifiedBodyResult | { readonly ok: false; readonly reason: 'error'; readonly err: unknown };
      try {
        r = typeof result === 'function' ? result() : result;
      } catch (err) {
        r = { ok: false, reason: 'error', err };
      }
      chunks = [];
      o.budget.give(taken);
      taken = 0;
      req.on('error', () => undefined);
      // too_large: the rest flows to nowhere so the client reads its 413. Over budget, too slow or
      // failed: nothing more is read; the listener answers and closes.
      if (!r.ok && r.reason === 'too_large') req.resume();
      else if (!r.ok) req.pause();
      // Thrown inside a stream event it would crash the process: the caller gets it instead.
      if (!r.ok && r.reason === 'error') reject(r.err);
      else resolve(r);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > o.maxBytes) return done({ ok: false, reason: 'too_large' });
      if (!Number.isFinite(declared)) {
        if (!o.budget.tryTake(chunk.length)) return done({ ok: false, reason: 'over_budget' });
        taken += chunk.length;
      }
      try {
        o.verifier.update(chunk);
      } catch (err) {
        return done(() => {
          throw err;
        });
      }
      chunks.push(chunk);
    };
    const onEnd = (): void =>
      done(() => ({ ok: true, verified: o.verifier.finish(), body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) }));
    const onAborted = (): void => done({ ok: false, reason: 'aborted' });
    const timer = setTimeout(() => done({ ok: false, reason: 'body_timeout' }), o.timeoutMs);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('aborted', onAborted);
    req.on('error', onAborted);
  });
}
