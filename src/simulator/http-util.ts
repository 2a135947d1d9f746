import type { IncomingMessage, ServerResponse } from 'node:http';
import { SimulatorError } from './errors.js';

/** Largest request body the simulator reads (bytes). */
export const MAX_BODY_BYTES = 1_048_576;

/** Reads the body; undefined when it exceeds {@link MAX_BODY_BYTES}. */
export async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Parses a JSON object body (empty body → `{}`); throws `ERR_SIMULATOR_INVALID_INPUT`. */
export async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const text = await readBody(req);
  if (text === undefined) throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', 'body too large');
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', 'body is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', 'body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/** Writes `body` as JSON with `content-type: application/json` and `content-length`, nothing else. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** 404 `{error: "not_found"}`: a path no route table knows (express's own 404 would be HTML). */
export function sendNotFound(_req: IncomingMessage, res: ServerResponse): void {
  sendJson(res, 404, { error: 'not_found' });
}

const STATUS_BY_CODE: Record<SimulatorError['code'], number> = {
  ERR_SIMULATOR_INVALID_INPUT: 400,
  ERR_SIMULATOR_FIXTURE_INVALID: 400,
  ERR_SIMULATOR_OPTIONS_INVALID: 400,
  ERR_SIMULATOR_NOT_FOUND: 404,
  ERR_SIMULATOR_CONFLICT: 409,
};

/** Turns an error into a JSON answer: `{error: code, problems}` for ours, 500 otherwise. */
export function sendError(res: ServerResponse, err: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (err instanceof SimulatorError) {
    sendJson(res, STATUS_BY_CODE[err.code], { error: err.code, problems: err.problems });
    return;
  }
  sendJson(res, 500, { error: 'internal_error' });
}
