// The Node.js options Outpost is shipped and measured with (the images set
// them in NODE_OPTIONS; `npm run bench` starts the agent with them).
//
// Why: a check's objects live about as long as the check (tens to hundreds of
// ms), longer than V8's default 16 MB semi-space lasts at a few thousand checks
// a second, so they get promoted and linger as old-space garbage until a major
// GC. The live set stays small (≈ 15–20 MB after a full GC at 256 in flight); a
// smaller young generation keeps peak RSS under 200 MB there at the same
// throughput: 188–194 MB with 4, 193–202 MB with 8, 213–245 MB with Node's
// default. Measured side by side in the issue notes of #2.
// V8's regular-expression flags are not here: Node.js refuses them in
// NODE_OPTIONS; src/checks/assertions/regex.ts sets them at run time.
export const RECOMMENDED_NODE_OPTIONS = '--max-semi-space-size=4';
