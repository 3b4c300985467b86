// Exact percentiles: linear interpolation between the closest ranks, as
// PostgreSQL's percentile_cont and numpy's default method compute them.
// For sorted values v[0..n-1] and 0 <= p <= 1, the rank is h = p·(n−1); the
// answer is v[⌊h⌋] + (h − ⌊h⌋)·(v[⌊h⌋+1] − v[⌊h⌋]). The dashboards' P95/P99
// and the analytics routes use this one definition, so the same window answers
// the same figure on both (docs/dashboards.md, docs/analytics.md).

/** The p-th quantile (0–1) of ascending `sorted`; NaN for no values. */
export function percentileCont(sorted: Float64Array | number[], p: number): number {
  const n = sorted.length;
  if (n === 0 || !(p >= 0 && p <= 1)) return Number.NaN;
  const h = p * (n - 1);
  const low = Math.floor(h);
  const lower = sorted[low] as number;
  if (low >= n - 1) return lower;
  const fraction = h - low;
  // Equal neighbours give the value itself, never a rounding of it.
  if (fraction === 0) return lower;
  const upper = sorted[low + 1] as number;
  return lower + fraction * (upper - lower);
}
