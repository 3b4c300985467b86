// The error groups of the public API (docs/server.md "Error groups"): one
// group by id, and archiving it. Groups are made by the store as failing
// results arrive (src/store/sqlite/error-groups-store.ts).

import type { ErrorGroupPatch, ErrorGroupStore } from '../store/error-groups.js';
import { badRequest, notFound } from './http/api-error.js';
import type { Route } from './http/router.js';

export interface ErrorGroupsApiDeps {
  errorGroups: ErrorGroupStore;
  now?: () => Date;
}

const PATCH_FIELDS = ['archiveForEver', 'archivedUntilNextEvent'] as const;

function noQuery(query: URLSearchParams): void {
  for (const name of query.keys()) throw badRequest(`unknown query parameter ${name}`, { parameter: name });
}

/** The PATCH body: an object with one or both flags, booleans, and nothing else. */
export function parseErrorGroupPatch(body: unknown): ErrorGroupPatch {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw badRequest(`the body must be a JSON object with ${PATCH_FIELDS.join(' and/or ')}`, { field: '$' });
  }
  const record = body as Record<string, unknown>;
  for (const name of Object.keys(record)) {
    if (!(PATCH_FIELDS as readonly string[]).includes(name)) throw badRequest(`unknown field ${name} (allowed: ${PATCH_FIELDS.join(', ')})`, { field: name });
  }
  const patch: ErrorGroupPatch = {};
  for (const name of PATCH_FIELDS) {
    const value = record[name];
    if (value === undefined) continue;
    if (typeof value !== 'boolean') throw badRequest(`${name} must be true or false, not ${JSON.stringify(value)}`, { field: name });
    patch[name] = value;
  }
  if (patch.archiveForEver === undefined && patch.archivedUntilNextEvent === undefined) {
    throw badRequest(`the body must set ${PATCH_FIELDS.join(' and/or ')}`, { field: '$' });
  }
  if (patch.archiveForEver === true && patch.archivedUntilNextEvent === false) {
    throw badRequest('archivedUntilNextEvent false (reopen) contradicts archiveForEver true', { field: 'archivedUntilNextEvent' });
  }
  return patch;
}

export function errorGroupRoutes(deps: ErrorGroupsApiDeps): Route[] {
  const now = deps.now ?? (() => new Date());
  return [
    {
      method: 'GET',
      path: '/v1/error-groups/:id',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        noQuery(query);
        const id = params.id as string;
        const group = await deps.errorGroups.group(id);
        if (!group) throw notFound('error group', id);
        return { status: 200, body: group };
      },
    },
    {
      method: 'PATCH',
      path: '/v1/error-groups/:id',
      auth: 'public',
      bodyLimit: 4_096,
      async handle({ params, query, body }) {
        noQuery(query);
        const id = params.id as string;
        const patch = parseErrorGroupPatch(body);
        const group = await deps.errorGroups.patch(id, patch, now());
        if (!group) throw notFound('error group', id);
        return { status: 200, body: group };
      },
    },
  ];
}
