// The service's error body, `{statusCode, error, message, attributes}`, for
// every answer that is not a success; a handler throws ApiError and the
// router writes it.

import { STATUS_CODES } from 'node:http';
import type { ErrorBody } from '../../core/protocol.js';

export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly attributes: Record<string, unknown> = {},
    /** Extra response headers (Retry-After on a 429). */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  get body(): ErrorBody {
    return errorBody(this.statusCode, this.message, this.attributes);
  }
}

/** The error body for a status: `error` is the status's reason phrase ("Not Found", "Too Many Requests"). */
export function errorBody(statusCode: number, message: string, attributes: Record<string, unknown> = {}): ErrorBody {
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', message, attributes };
}

export const badRequest = (message: string, attributes: Record<string, unknown> = {}) => new ApiError(400, message, attributes);
export const notFound = (what: string, id: string) => new ApiError(404, `${what} ${id} does not exist`, { id });
/** The service's answer to a bad token, exactly. */
export const unauthorized = () => new ApiError(401, 'bad token');
