// `GET /v1/maintenance-windows` (docs/server.md "Maintenance windows"): the
// checks file's windows as the service's records, a page at a time.

import type { MaintenanceWindowStore } from '../store/maintenance-windows.js';
import { badRequest } from './http/api-error.js';
import type { Route } from './http/router.js';

export interface MaintenanceApiDeps {
  windows: MaintenanceWindowStore;
}

export const DEFAULT_WINDOWS_LIMIT = 10;
export const MAX_WINDOWS_LIMIT = 100;
/** Pages past this hold nothing for any file the server accepts; the bound keeps OFFSET small. */
const MAX_PAGE = 1_000_000;

/** `limit` 1–100 (default 10) and `page` from 1 (default 1); anything else is a 400 naming the parameter. */
export function parseWindowQuery(query: URLSearchParams): { limit: number; page: number } {
  const seen = new Set<string>();
  for (const name of query.keys()) {
    if (name !== 'limit' && name !== 'page') throw badRequest(`unknown query parameter ${name}`, { parameter: name });
    if (seen.has(name)) throw badRequest(`query parameter ${name} is given more than once`, { parameter: name });
    seen.add(name);
  }
  const parsed = { limit: DEFAULT_WINDOWS_LIMIT, page: 1 };
  const limit = query.get('limit');
  if (limit !== null) {
    if (!/^\d{1,3}$/.test(limit) || Number(limit) < 1 || Number(limit) > MAX_WINDOWS_LIMIT) {
      throw badRequest(`limit must be an integer from 1 to ${MAX_WINDOWS_LIMIT}, not ${JSON.stringify(limit)}`, { parameter: 'limit' });
    }
    parsed.limit = Number(limit);
  }
  const page = query.get('page');
  if (page !== null) {
    if (!/^\d{1,7}$/.test(page) || Number(page) < 1 || Number(page) > MAX_PAGE) {
      throw badRequest(`page must be an integer from 1 to ${MAX_PAGE}, not ${JSON.stringify(page)}`, { parameter: 'page' });
    }
    parsed.page = Number(page);
  }
  return parsed;
}

export function maintenanceRoutes(deps: MaintenanceApiDeps): Route[] {
  return [
    {
      method: 'GET',
      path: '/v1/maintenance-windows',
      auth: 'public',
      bodyLimit: 0,
      async handle({ query }) {
        const { limit, page } = parseWindowQuery(query);
        return { status: 200, body: await deps.windows.list(limit, page) };
      },
    },
  ];
}
