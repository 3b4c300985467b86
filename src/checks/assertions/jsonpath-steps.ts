// A bound on the work of one JSONPath query. RFC 9535 lets a query select a
// node more than once, so its result can grow far past the document:
// `$..*..*` selects every node once per ancestor (a 4 MB body nested 250
// deep: 4 GB and 30 s), and `$[0,0,0,0][0,0,0,0]…` multiplies with every
// segment even on a tiny document. The query reads the document through a
// view that counts every property read and stops it past a fixed number:
// each selected node costs at least one read, so time and the result's
// length are bounded together.

/** Property reads one query may make of its document. */
export const MAX_QUERY_READS = 10_000_000;

export class QueryTooLarge extends Error {
  constructor(readonly reads: number) {
    super(`reads more than ${reads.toLocaleString('en-US')} values of this document`);
  }
}

/**
 * `document` as a view whose property reads count against `reads`, and
 * `unwrap`, which gives back the plain value of whatever the query selected
 * (so that nothing read after the query counts, or throws).
 */
export function countedView(document: unknown, reads = MAX_QUERY_READS): { view: unknown; unwrap: (value: unknown) => unknown } {
  const views = new WeakMap<object, object>();
  const targets = new WeakMap<object, object>();
  let left = reads;
  const wrap = (value: unknown): unknown => {
    // A frozen object's properties must read as themselves through a Proxy: such a (hand-built) document is not counted below it.
    if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
    let view = views.get(value);
    if (!view) {
      view = new Proxy(value, handler);
      views.set(value, view);
      targets.set(view, value);
    }
    return view;
  };
  const handler: ProxyHandler<object> = {
    get(target, key) {
      left -= 1;
      if (left < 0) throw new QueryTooLarge(reads);
      return wrap(Reflect.get(target, key));
    },
  };
  return {
    view: wrap(document),
    unwrap: (value) => (value !== null && typeof value === 'object' ? (targets.get(value) ?? value) : value),
  };
}
