import { AllowedDecision } from './parse-response.js';

/** The key to {@link AllowAnswer}'s constructor: held by this module (by {@link AllowAnswer.of}), exported nowhere. */
const FROM_DECISION: unique symbol = Symbol('AllowAnswer.of');

/**
 * The start of an ALLOW body for one configKey, up to its `validUntil`: with `validUntil` (a safe
 * integer) and `}` appended it is what `JSON.stringify({decision, configKey, validUntil})` writes,
 * without building the object. Made only from the configKey itself ({@link AllowBodyPrefix.of}), so
 * it cannot say another; the ALLOW cache keeps one per configKey.
 */
export class AllowBodyPrefix {
  /** Makes the type nominal: a look-alike literal with another text is not a prefix. No field at run time. */
  private declare readonly made: true;

  private constructor(
    readonly configKey: string,
    readonly text: string,
    /** UTF-8 bytes of `text`. */
    readonly bytes: number,
  ) {}

  static of(configKey: string): AllowBodyPrefix {
    const text = `{"decision":"ALLOW","configKey":${JSON.stringify(configKey)},"validUntil":`;
    return new AllowBodyPrefix(configKey, text, Buffer.byteLength(text));
  }
}

/**
 * The one answer that lets the app proceed: status 200, `decision: 'allow'`, and the service's own
 * body `{"decision":"ALLOW","configKey":…,"validUntil":…}` rebuilt from an {@link AllowedDecision}.
 * Nothing makes one but {@link AllowAnswer.of}, which takes an AllowedDecision (only the fail-closed
 * parser makes those): a literal `{ status: 200, decision: 'allow', … }` where an `Answer` is
 * expected does not compile, and the constructor, private, also refuses at run time a call that
 * does not come from `of`. Every route renders an ALLOW from this type alone, and tells it apart
 * with `instanceof`, so a look-alike object forged past the compiler is no ALLOW either.
 */
export class AllowAnswer {
  /** Makes the type nominal: a look-alike literal is not an AllowAnswer. No field at run time. */
  private declare readonly minted: typeof FROM_DECISION;

  readonly status: 200 = 200;
  readonly decision: 'allow' = 'allow';

  private constructor(
    key: typeof FROM_DECISION,
    readonly source: 'cache' | 'upstream',
    readonly body: string,
    /** UTF-8 bytes of `body`. */
    readonly bodyBytes: number,
    /** `validUntil` in decimal, as in `body` (for a header: no number formatted). */
    readonly validUntilText: string,
  ) {
    if (key !== FROM_DECISION) throw new TypeError('an ALLOW answer is made by AllowAnswer.of only');
  }

  /** The ALLOW's `validUntil` (the one in `body`, epoch ms), so a reader need not parse the body back. */
  get validUntil(): number {
    return Number(this.validUntilText);
  }

  /**
   * The answer of `allowed` from `source`. `prefix`, when given, is the interned start of the body
   * for the decision's configKey (a cache hit then builds one short string); a prefix for another
   * configKey is never used.
   */
  static of(allowed: AllowedDecision, source: 'cache' | 'upstream', prefix?: AllowBodyPrefix): AllowAnswer {
    if (!(allowed instanceof AllowedDecision)) throw new TypeError('an ALLOW answer is made from an AllowedDecision only');
    const p = prefix !== undefined && prefix.configKey === allowed.configKey ? prefix : AllowBodyPrefix.of(allowed.configKey);
    const v = allowed.validUntilText;
    return new AllowAnswer(FROM_DECISION, source, `${p.text}${v}}`, p.bytes + v.length + 1, v);
  }
}
