import { identityOf } from './identity.js';
import type { NotificationRequirementItem } from './list-pending.js';

/**
 * What one run holds of a listing: every record's identity, in listing order, and the records
 * themselves (as JSON text) only while they fit in `budgetChars`. Past it the texts are let go and
 * {@link complete} turns false: the reconciler then lists again for the records it hands (a run
 * holds identities, not a copy of whatever the service sent).
 *
 * @example
 * const held = new HeldRecords(8_388_608);
 * held.add({ id: 'nrq_1', status: 'pending' });
 * held.json('nrq_1'); // '{"id":"nrq_1","status":"pending"}'
 */
export class HeldRecords {
  private readonly ids = new Set<string>();
  private texts: Map<string, string> | null = new Map();
  private chars = 0;

  /** `budgetChars`: most characters of record JSON held (the reconciler uses `--redec-max-page-bytes`). */
  constructor(private readonly budgetChars: number) {}

  /**
   * Told a page of `bytes` is about to be added: when the texts could not all fit, they are let go
   * now, before any of the page is turned into text (a page may be one 8 MiB record).
   */
  expectPage(bytes: number): void {
    if (this.texts && this.chars + bytes > this.budgetChars) this.texts = null;
  }

  /** Adds a page of listed records. */
  addAll(records: readonly NotificationRequirementItem[]): void {
    for (const record of records) this.add(record);
  }

  /** Adds a listed record; a second record with an identity already held is ignored. */
  add(record: NotificationRequirementItem): void {
    const id = identityOf(record);
    if (this.ids.has(id)) return;
    this.ids.add(id);
    if (!this.texts) return;
    const text = JSON.stringify(record);
    this.chars += text.length;
    if (this.chars > this.budgetChars) this.texts = null;
    else this.texts.set(id, text);
  }

  get size(): number {
    return this.ids.size;
  }

  /** True while every record added is held as text. */
  get complete(): boolean {
    return this.texts !== null;
  }

  identities(): string[] {
    return [...this.ids];
  }

  /** The record of `identity` as JSON text, when held. */
  json(identity: string): string | undefined {
    return this.texts?.get(identity);
  }
}
