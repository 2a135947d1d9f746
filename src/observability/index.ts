export { LOG_LEVELS, type LogLevel } from './log-levels.js';
export { createLogger, SIMULATOR_SERVICE_NAME, silentLogger, type Logger } from './logger.js';
export { createRegistry, METRIC_PREFIX } from './registry.js';
export { Readiness } from './readiness.js';
export { RateLimiter } from './rate-limited-log.js';
export { registerBuildInfo } from './build-info.js';
export { FastHistogram } from './fast-histogram.js';
export { FastCounter } from './fast-counter.js';
export { stdoutSink, STDOUT_BUFFER_BYTES, type StdoutSink } from './stdout.js';
