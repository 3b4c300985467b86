// Every relative link in README.md, CHANGELOG.md and docs/**/*.md leads
// somewhere: the file or folder exists and, for `#anchor` into a Markdown
// file, a heading there has that GitHub-style slug. Pages move (the README
// was split into docs/), and a link that breaks silently strands a reader.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useTempTrees } from '../support/temp-tree.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** The Markdown files whose links are checked, relative to `root`. */
function markdownFiles(root: string): string[] {
  const files = ['README.md', 'CHANGELOG.md'].filter((file) => existsSync(path.join(root, file)));
  const walk = (dir: string): void => {
    for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.md')) files.push(rel);
    }
  };
  if (existsSync(path.join(root, 'docs'))) walk('docs');
  return files;
}

/**
 * The text with code blanked out (fenced blocks and inline spans become
 * spaces, newlines kept), so offsets still give line numbers and nothing
 * quoted as code counts as a link or a heading.
 */
function withoutCode(text: string): string {
  const blank = (s: string): string => s.replace(/[^\n]/g, ' ');
  const lines = text.split('\n');
  let fence: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === null && open?.[1]) {
      fence = open[1];
      lines[i] = blank(line);
    } else if (fence !== null) {
      if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, '') === '') fence = null;
      lines[i] = blank(line);
    }
  }
  return lines.join('\n').replace(/(`+)[^`](?:(?!\n\n)[\s\S])*?\1/g, (span) => blank(span));
}

/** Plain text of a heading as GitHub renders it: links to their text, code and emphasis marks gone. */
function headingText(raw: string): string {
  return raw
    .replace(/\s+#+\s*$/, '')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/[`*]/g, '')
    .trim();
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return headingText(heading)
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a Markdown text offers: heading slugs (repeats numbered as GitHub does) and explicit `id`/`name`s. */
function anchors(text: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  const raw = text.split('\n');
  withoutCode(text)
    .split('\n')
    .forEach((line, i) => {
      if (!/^ {0,3}#{1,6}\s/.test(line)) return;
      const base = slug((raw[i] ?? '').replace(/^ {0,3}#{1,6}\s+/, ''));
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      found.add(n === 0 ? base : `${base}-${n}`);
    });
  for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) if (m[1]) found.add(m[1]);
  return found;
}

interface LinkProblem {
  file: string;
  line: number;
  target: string;
  reason: string;
}

/** The links of `files` (relative to `root`) that lead nowhere. */
function brokenLinks(root: string, files: readonly string[]): LinkProblem[] {
  const problems: LinkProblem[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchorsOf = (file: string): Set<string> => {
    let set = anchorCache.get(file);
    if (!set) {
      set = anchors(readFileSync(file, 'utf8'));
      anchorCache.set(file, set);
    }
    return set;
  };
  for (const file of files) {
    const text = readFileSync(path.join(root, file), 'utf8');
    const scanned = withoutCode(text);
    const targets: { target: string; at: number }[] = [];
    // Inline links and images; a link text may hold brackets one level deep and wrap lines.
    for (const m of scanned.matchAll(/!?\[(?:[^[\]]|\[[^[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) {
      targets.push({ target: m[1] ?? '', at: m.index });
    }
    for (const m of scanned.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) {
      targets.push({ target: m[1] ?? '', at: m.index });
    }
    for (const { target, at } of targets) {
      const line = scanned.slice(0, at).split('\n').length;
      const report = (reason: string): void => {
        problems.push({ file, line, target, reason });
      };
      if (target === '') {
        report('empty link target');
        continue;
      }
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: …
      const hash = target.indexOf('#');
      const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash)).replace(/\?.*$/, '');
      const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
      if (pathPart.startsWith('/')) {
        report('absolute path: use a path relative to the page');
        continue;
      }
      let resolved = pathPart === '' ? path.join(root, file) : path.join(root, path.dirname(file), pathPart);
      if (!existsSync(resolved)) {
        report(`${path.relative(root, resolved)} does not exist`);
        continue;
      }
      if (anchor === null) continue;
      if (statSync(resolved).isDirectory()) resolved = path.join(resolved, 'README.md');
      if (!resolved.endsWith('.md')) continue; // line anchors into source files are GitHub's business
      if (!existsSync(resolved)) {
        report(`${path.relative(root, resolved)} does not exist`);
        continue;
      }
      if (!anchorsOf(resolved).has(anchor)) report(`no heading #${anchor} in ${path.relative(root, resolved)}`);
    }
  }
  return problems;
}

const tree = useTempTrees('outpost-docs-links-');

describe('links in the documentation', () => {
  it('every relative link in README.md, CHANGELOG.md and docs/ resolves', () => {
    const files = markdownFiles(REPO);
    expect(files).toContain('README.md');
    expect(files).toContain(path.join('docs', 'checks', 'README.md'));
    const problems = brokenLinks(REPO, files).map((p) => `${p.file}:${p.line}: (${p.target}) ${p.reason}`);
    expect(problems).toEqual([]);
  });
});

describe('the link checker', () => {
  it('slugs headings as GitHub does', () => {
    expect(slug('`docker run`')).toBe('docker-run');
    expect(slug('Result: `tcpCheckResult`')).toBe('result-tcpcheckresult');
    expect(slug('Probes and metrics (`AGENT_HEALTH_PORT`, default 8081)')).toBe('probes-and-metrics-agent_health_port-default-8081');
    expect(slug('What the images do, and why')).toBe('what-the-images-do-and-why');
    expect(slug('Node.js 24 — everywhere')).toBe('nodejs-24--everywhere');
    expect(slug('See [the spool](spool.md)')).toBe('see-the-spool');
    expect([...anchors('# A\n## A\n```\n# not a heading\n```\n### A\n')]).toEqual(['a', 'a-1', 'a-2']);
  });

  it('names every broken link, and only those', () => {
    const root = tree({
      'README.md': [
        '# Top',
        '[fine](docs/a.md) and [fine too](docs/a.md#second-part) and [web](https://example.com/x.md)',
        '[missing file](docs/gone.md)',
        '[missing heading](docs/a.md#third-part)',
        '[wrapped',
        'text](#top) [self, broken](#bottom)',
        '`[in code](nowhere.md)`',
        '```md',
        '[in a fence](nowhere.md)',
        '```',
        '[folder](docs/) [folder anchor](docs/#second-part) [source](src/x.ts#L3)',
      ].join('\n'),
      'docs/a.md': '# First\n\n## Second part\n\n[back](../README.md#top) [up and gone](../../elsewhere.md)\n',
      'docs/README.md': '# Docs\n',
      'src/x.ts': '',
    });
    const problems = brokenLinks(root, markdownFiles(root)).map((p) => `${p.file}:${p.line}: ${p.target}`);
    expect(problems).toEqual([
      'README.md:3: docs/gone.md',
      'README.md:4: docs/a.md#third-part',
      'README.md:6: #bottom',
      'README.md:11: docs/#second-part',
      `${path.join('docs', 'a.md')}:5: ../../elsewhere.md`,
    ]);
  });
});
