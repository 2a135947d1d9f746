import { randomUUID } from 'node:crypto';
import type { DsrEventType } from './event-types.js';

const DAY_MS = 86_400_000;

/**
 * Data of a `data_subject_request.*` event: the documented common, intermediate and specific fields
 * with plausible defaults, overridden by `overrides`. `created` and `resolved` are not intermediate
 * events, so they carry no `previousStatus`/`actorType` (and `resolved` no `dueAt`).
 */
export function dsrEventData(
  type: DsrEventType,
  overrides: Readonly<Record<string, unknown>>,
  now: number,
): Record<string, unknown> {
  const dueAt = now + 15 * DAY_MS;
  const common = {
    schemaVersion: 1,
    requestId: `dsr_${randomUUID()}`,
    customerId: 'cus_alice',
    rightType: 'access',
  };
  const intermediate = (status: string, previousStatus: string, actorType: string, requestVersion: number) => ({
    status,
    previousStatus,
    dueAt,
    actorType,
    requestVersion,
  });
  let specific: Record<string, unknown>;
  switch (type) {
    case 'data_subject_request.created':
      specific = { status: 'received', dueAt, requestVersion: 1 };
      break;
    case 'data_subject_request.review_started':
      specific = intermediate('in_review', 'received', 'tenant_user', 2);
      break;
    case 'data_subject_request.additional_information_requested':
      specific = intermediate('awaiting_information', 'in_review', 'tenant_user', 3);
      break;
    case 'data_subject_request.additional_information_received':
      specific = {
        ...intermediate('in_review', 'awaiting_information', 'data_subject', 4),
        respondsToInformationRequest: true,
        attachmentCount: 1,
      };
      break;
    case 'data_subject_request.deadline_extended':
      specific = { ...intermediate('in_review', 'in_review', 'tenant_user', 5), previousDueAt: dueAt, dueAt: dueAt + 15 * DAY_MS };
      break;
    case 'data_subject_request.resolved':
      specific = { status: 'resolved', requestVersion: 6, resolutionOutcome: 'resolved', fulfillmentRequired: true };
      break;
    case 'data_subject_request.fulfillment_confirmed':
      // The document: keeps the requestVersion of the resolution and adds no state transition.
      specific = {
        ...intermediate('resolved', 'resolved', 'tenant_user', 6),
        outcome: 'confirmed',
        performedAt: now - 60_000,
        recordedAt: now,
      };
      break;
  }
  return { ...common, ...specific, ...overrides };
}
