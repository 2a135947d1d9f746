export { RedecError, type RedecErrorCode } from './errors.js';
export {
  listNotificationRequirements,
  DEFAULT_REDEC_PAGE_LIMIT,
  MAX_REDEC_PAGES,
  type ListOptions,
  type NotificationRequirementItem,
} from './list-pending.js';
export { formatTable } from './format-table.js';
