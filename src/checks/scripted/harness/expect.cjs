// @ts-check
// `expect(value)`, the assertions a MULTI_STEP or BROWSER script (and an API check's scripts) gets as a
// global from harness.cjs. A failed one throws an ExpectationError: the run fails as an assertion.
'use strict';

class ExpectationError extends Error {
  constructor(message) { super(message); this.name = 'ExpectationError'; }
}
const show = (v) => { try { const t = JSON.stringify(v); return t === undefined ? String(v) : (t.length > 200 ? `${t.slice(0, 197)}...` : t); } catch { return String(v); } };
// Structural equality as toEqual means it: key order ignored, undefined properties ignored, NaN equal
// to NaN; plain objects equal whatever their prototype (Object's or none), instances of a class only
// to instances of the same class; Errors by name and message, URLs by href, Dates by time, Maps and Sets
// by entries (members matched structurally), typed arrays by bytes. A pair already being compared
// further up the same path (a cycle) counts as equal.
function same(a, b, path) {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  path = path || [];
  if (path.some(([x, y]) => x === a && y === b)) return true;
  path.push([a, b]);
  try {
    const plainObject = (v) => { const proto = Object.getPrototypeOf(v); return proto === Object.prototype || proto === null; };
    const kind = (v) => (Array.isArray(v) ? 'array' : v instanceof Date ? 'date' : v instanceof RegExp ? 'regexp' : v instanceof Map ? 'map' : v instanceof Set ? 'set' : ArrayBuffer.isView(v) ? 'bytes' : v instanceof Error ? 'error' : v instanceof URL ? 'url' : plainObject(v) ? 'object' : 'instance');
    if (kind(a) !== kind(b)) return false;
    if (kind(a) === 'instance' && Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
    switch (kind(a)) {
      case 'error': if (a.name !== b.name || a.message !== b.message) return false; break;
      case 'url': return a.href === b.href;
      case 'date': return Object.is(a.getTime(), b.getTime());
      case 'regexp': return String(a) === String(b);
      case 'bytes': return a.byteLength === b.byteLength && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
      case 'map': return a.size === b.size && [...a].every(([k, v]) => b.has(k) && same(v, b.get(k), path));
      case 'set': {
        const rest = [...b];
        return a.size === b.size && [...a].every((v) => {
          const i = rest.findIndex((w) => same(v, w, path));
          return i >= 0 && rest.splice(i, 1).length === 1;
        });
      }
      case 'array': return a.length === b.length && a.every((v, i) => same(v, b[i], path));
    }
    const keys = (o) => Object.keys(o).filter((k) => o[k] !== undefined);
    const ka = keys(a);
    const kb = keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && same(a[k], b[k], path));
  } finally {
    path.pop();
  }
}
function expect(actual, negate) {
  const check = (ok, text) => { if (Boolean(ok) === Boolean(negate)) throw new ExpectationError(`expected ${show(actual)}${negate ? ' not ' : ' '}${text}`); };
  const api = {
    toBe: (e) => check(Object.is(actual, e), `to be ${show(e)}`),
    toEqual: (e) => check(same(actual, e), `to equal ${show(e)}`),
    toBeTruthy: () => check(actual, 'to be truthy'),
    toBeFalsy: () => check(!actual, 'to be falsy'),
    toBeDefined: () => check(actual !== undefined, 'to be defined'),
    toBeNull: () => check(actual === null, 'to be null'),
    toContain: (e) => check(actual?.includes(e), `to contain ${show(e)}`),
    toMatch: (re) => check(new RegExp(re).test(String(actual)), `to match ${String(re)}`),
    toBeGreaterThan: (e) => check(actual > e, `to be greater than ${show(e)}`),
    toBeLessThan: (e) => check(actual < e, `to be less than ${show(e)}`),
    toHaveProperty: (k) => check(actual != null && Object.hasOwn(actual, k), `to have property ${show(k)}`),
    toBeOK: () => {
      // biome-ignore lint/complexity/useOptionalChain: a falsy actual (0, '') is its own status in the message, not undefined.
      const status = actual && typeof actual.status === 'function' ? actual.status() : actual && actual.status;
      if (Boolean(status >= 200 && status < 300) === Boolean(negate)) throw new ExpectationError(`expected response status ${status}${negate ? ' not' : ''} to be 2xx`);
    },
  };
  if (!negate) Object.defineProperty(api, 'not', { get: () => expect(actual, true) });
  return api;
}


module.exports = { ExpectationError, expect, show };
