/**
 * ALLOWs for tests, made the only way the sidecar makes one: the service's own ALLOW body, read by
 * the fail-closed parser. There is no other way to hold an {@link AllowedDecision} or an
 * {@link AllowAnswer} (a cast to either in a test is a defect: it tests something the sidecar
 * cannot hold).
 */
import { decisionAnswer, parseCheckResponse, type AllowAnswer, type AllowedDecision } from '../../src/decision/index.js';
import { allow } from './upstream.js';

/**
 * The parser's ALLOW for `configKey` until `validUntil`, read at `nowMs` (epoch ms; the parser
 * refuses an ALLOW already expired on that clock, so a test with a frozen clock passes its own).
 * `askedConfigKey` is the string the parser is asked with (equal to `configKey`; the ALLOW keeps it).
 */
export function allowedFor(configKey: string, validUntil: number, nowMs = 0, askedConfigKey = configKey): AllowedDecision {
  const { decision } = parseCheckResponse({ status: 200, date: undefined, body: JSON.stringify(allow(configKey, validUntil)) }, askedConfigKey, nowMs);
  if (decision.kind !== 'allow') throw new Error(`the parser did not take ${configKey}/${validUntil} for an ALLOW`);
  return decision;
}

/** The ALLOW answer of {@link allowedFor}, as the decision service or the cache (`source`) gives it. */
export function allowAnswerFor(configKey: string, validUntil: number, source: 'cache' | 'upstream', nowMs = 0): AllowAnswer {
  const a = decisionAnswer(allowedFor(configKey, validUntil, nowMs), source);
  if (a.decision !== 'allow') throw new Error('an AllowedDecision made no ALLOW answer');
  return a;
}
