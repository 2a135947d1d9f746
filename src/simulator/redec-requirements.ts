import { SimulatorError } from './errors.js';

export const NOTIFICATION_STATUSES = ['pending', 'evidence_registered', 'sent_by_service'] as const;
/**
 * `pending`: a tenant-responsibility obligation without evidence; `evidence_registered`: the tenant
 * posted evidence; `sent_by_service`: the service sent the notice itself (service responsibility).
 * The document shows only `pending`; the other two are the simulator's.
 */
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number];

/**
 * One record of `GET /v1/redec/notification-requirements` (the document does not show its fields):
 * ```json
 * { "notificationRequirementId": "nrq_000001", "redecConsentId": "rdc_…", "consentActionId": "cact_…",
 *   "notificationReason": "grant", "deliveryResponsibility": "tenant", "customerTenantId": "alice",
 *   "status": "pending", "createdAt": 1767225600000 }
 * ```
 * `createdAt`/`resolvedAt` are epoch ms.
 */
export interface NotificationRequirement {
  readonly notificationRequirementId: string;
  readonly redecConsentId: string;
  readonly consentActionId: string;
  readonly notificationReason: 'grant' | 'revoke';
  readonly deliveryResponsibility: 'service' | 'tenant';
  readonly customerTenantId: string;
  readonly status: NotificationStatus;
  readonly createdAt: number;
  readonly resolvedAt?: number;
}

/** A page: `nextCursor` is null on the last page. */
export interface NotificationRequirementPage {
  readonly items: readonly NotificationRequirement[];
  readonly nextCursor: string | null;
}

/** Page size of the listing when `limit` is absent, and its maximum. */
export const DEFAULT_PAGE_LIMIT = 50;
export const MAX_PAGE_LIMIT = 500;

const encodeCursor = (seq: number): string => Buffer.from(`after:${seq}`).toString('base64url');

function decodeCursor(cursor: string): number {
  const match = /^after:(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', 'cursor: not a cursor returned by this listing');
  return Number(match[1]);
}

/** The durable listing of REDEC notification obligations, in creation order. */
export class NotificationRequirements {
  private readonly records: { seq: number; record: NotificationRequirement }[] = [];
  private seq = 0;

  add(input: Omit<NotificationRequirement, 'notificationRequirementId' | 'status'>): NotificationRequirement {
    this.seq += 1;
    const resolved = input.deliveryResponsibility === 'service';
    const record: NotificationRequirement = {
      notificationRequirementId: `nrq_${String(this.seq).padStart(6, '0')}`,
      ...input,
      status: resolved ? 'sent_by_service' : 'pending',
      ...(resolved ? { resolvedAt: input.createdAt } : {}),
    };
    this.records.push({ seq: this.seq, record });
    return record;
  }

  /**
   * A deterministic page: records in creation order after `cursor`, filtered by `status` (all when
   * absent). The cursor names a position, not an offset, so records changing status between pages
   * never shift what the next page holds.
   */
  list(query: { status?: string; limit?: number; cursor?: string }): NotificationRequirementPage {
    const { status } = query;
    if (status !== undefined && !(NOTIFICATION_STATUSES as readonly string[]).includes(status)) {
      throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', `status: expected one of ${NOTIFICATION_STATUSES.join(', ')}`);
    }
    const limit = query.limit ?? DEFAULT_PAGE_LIMIT;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE_LIMIT) {
      throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', `limit: expected an integer 1..${MAX_PAGE_LIMIT}`);
    }
    const after = query.cursor === undefined ? 0 : decodeCursor(query.cursor);
    const matching = this.records.filter((r) => r.seq > after && (status === undefined || r.record.status === status));
    const page = matching.slice(0, limit);
    const last = page[page.length - 1];
    return {
      items: page.map((r) => r.record),
      nextCursor: matching.length > limit && last ? encodeCursor(last.seq) : null,
    };
  }

  /**
   * Registers the tenant's evidence for `redecConsentId`: resolves its pending obligations (only
   * those of `notificationReason` when given). Throws `ERR_SIMULATOR_NOT_FOUND` for an unknown id and
   * `ERR_SIMULATOR_CONFLICT` when nothing is pending.
   */
  registerEvidence(redecConsentId: string, now: number, notificationReason?: string): NotificationRequirement[] {
    const mine = this.records.filter((r) => r.record.redecConsentId === redecConsentId);
    if (mine.length === 0) throw new SimulatorError('ERR_SIMULATOR_NOT_FOUND', `no REDEC consent "${redecConsentId}"`);
    const open = mine.filter(
      (r) =>
        r.record.status === 'pending' &&
        (notificationReason === undefined || r.record.notificationReason === notificationReason),
    );
    if (open.length === 0) {
      throw new SimulatorError('ERR_SIMULATOR_CONFLICT', `no pending tenant obligation for "${redecConsentId}"`);
    }
    for (const r of open) r.record = { ...r.record, status: 'evidence_registered', resolvedAt: now };
    return open.map((r) => r.record);
  }
}
