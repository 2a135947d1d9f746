import express, { type ErrorRequestHandler, type Express, type RequestHandler } from 'express';
import type { Logger } from '../observability/logger.js';
import { CONTROL_PREFIX, controlRouter } from './control-routes.js';
import { SimulatorError } from './errors.js';
import { sendError, sendNotFound } from './http-util.js';
import { serviceRouter, type ServiceRouteOptions } from './service-routes.js';
import type { SimulatorCore } from './simulator-core.js';

/** What the simulator's HTTP face needs besides the core. */
export interface SimulatorAppOptions extends ServiceRouteOptions {
  /** When set, the control surface requires header `x-simulator-control-token` with this value. */
  readonly controlToken: string | undefined;
  /** Where an unexpected error (not a `SimulatorError`) is logged. */
  readonly logger: Logger;
}

/**
 * Paths are matched as the WHATWG URL parser resolves them against `http://simulator` (dot segments
 * removed, percent-encoding normalised), so `req.url` is rewritten to that pathname and search.
 */
const resolvePath: RequestHandler = (req, _res, next) => {
  const url = new URL(req.url, 'http://simulator');
  req.url = `${url.pathname}${url.search}`;
  next();
};

/**
 * Matches paths strictly below `prefix` (`/v1/…`, never `/v1` itself), case-sensitively. A string
 * mount path would also take `/v1` and any letter case; those are not the area's and answer 404.
 */
function below(prefix: string): RegExp {
  return new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?=/)`);
}

/**
 * The last word on any error: `{error: code, problems}` with the code's status for a
 * `SimulatorError`, 400 for a path parameter that does not decode, 500 `{error: "internal_error"}`
 * (logged) for anything else; never HTML.
 */
function jsonErrors(logger: Logger): ErrorRequestHandler {
  return (err: unknown, _req, res, _next) => {
    // express's router could not decode a path parameter (`%zz`): the request's fault, not ours.
    if (err instanceof URIError) return sendError(res, new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', `path: ${err.message}`));
    if (!(err instanceof SimulatorError)) logger.error({ err }, 'simulator request failed');
    sendError(res, err);
  };
}

/**
 * The simulator's express app: the service's `/v1/*` routes (see {@link serviceRouter}) and the
 * control surface under {@link CONTROL_PREFIX} (see {@link controlRouter}). Any other path answers
 * 404 `{error: "not_found"}`; errors answer JSON. No `x-powered-by`, no ETag: every answer is
 * written with `content-type: application/json` and `content-length` only.
 */
export function simulatorApp(core: SimulatorCore, options: SimulatorAppOptions): Express {
  const app = express();
  app.disable('x-powered-by');
  app.use(resolvePath);
  app.use(below(CONTROL_PREFIX), controlRouter(core, options.controlToken));
  app.use(below('/v1'), serviceRouter(core, { apiKey: options.apiKey, latencyMs: options.latencyMs }));
  app.use(sendNotFound);
  app.use(jsonErrors(options.logger));
  return app;
}
