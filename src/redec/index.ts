export { RedecError, type RedecBound, type RedecErrorCode } from './errors.js';
export {
  listNotificationRequirements,
  DEFAULT_LISTING_BOUNDS,
  DEFAULT_REDEC_PAGE_LIMIT,
  MAX_REDEC_PAGES,
  type ListOptions,
  type NotificationRequirementItem,
} from './list-pending.js';
export { formatTable } from './format-table.js';
export { DEFAULT_PAGE_FIELD_RULES, DEFAULT_REDEC_CURSOR_PARAM, DEFAULT_REDEC_ITEMS_FIELD, readPage, type PageFieldRules, type ParsedPage } from './page.js';
export { identityOf } from './identity.js';
export { MemoryLedger, type LedgerEntry, type ObligationLedger } from './ledger.js';
export { LocalLease, type ReconcileLease, type RunSummary } from './lease.js';
export { createRedecMetrics, HANDED_OUTCOMES, RUN_OUTCOMES, type HandedOutcome, type RedecMetrics, type RunOutcome } from './metrics.js';
export { RECONCILED_EVENT_TYPE, RECONCILED_HEADER, type DeliverToApp } from './hand-off.js';
export { Reconciler, type ReconcilerOptions } from './reconciler.js';
