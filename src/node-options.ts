// The Node.js options Outpost is shipped and measured with (the images set
// them in NODE_OPTIONS; `npm run bench` starts the agent with them).
//
// Why: a check's objects live about as long as the check (tens to hundreds of
// ms), longer than V8's default 16 MB semi-space lasts at a few thousand checks
// a second, so they get promoted and linger as old-space garbage until a major
// GC. A smaller young generation lowered peak RSS at 256 in flight by 20–50 MB
// at the same throughput when it was chosen; with today's lower garbage per
// check, 4, 8, 16 and 32 MB are within the bench's noise of one another
// (docs/development.md, "Benchmark" and "Memory at 256 in flight").
// V8's regular-expression flags are not here: Node.js refuses them in
// NODE_OPTIONS; src/checks/assertions/regex.ts sets them at run time.
export const RECOMMENDED_NODE_OPTIONS = '--max-semi-space-size=4';
