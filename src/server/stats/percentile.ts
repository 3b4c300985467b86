// Percentiles as PostgreSQL's percentile_cont and numpy's default compute
// them: linear interpolation between the closest ranks of the sorted values.
// The dashboards' P95/P99 and the analytics routes use this one definition,
// so the same window answers the same figure on both (docs/dashboards.md).

/**
 * The p-quantile (0 ≤ p ≤ 1) of `sorted` (ascending): at rank
 * h = (n − 1)·p, sorted[⌊h⌋] + (h − ⌊h⌋)·(sorted[⌊h⌋+1] − sorted[⌊h⌋]).
 * NaN for no values.
 */
export function percentileCont(sorted: Float64Array | number[], p: number): number {
  const n = sorted.length;
  if (n === 0 || !(p >= 0 && p <= 1)) return Number.NaN;
  const h = (n - 1) * p;
  const lo = Math.floor(h);
  const a = sorted[lo] as number;
  if (lo + 1 >= n) return a;
  const b = sorted[lo + 1] as number;
  return a + (h - lo) * (b - a);
}
