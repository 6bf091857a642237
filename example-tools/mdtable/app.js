// mdtable: Markdown a model would otherwise lay out by hand.
//
// - markdown_table: rows (objects or arrays) or CSV text -> an aligned
//   Markdown table, with per-column alignment (numbers right by default).
// - markdown_toc: a table of contents for a Markdown document, with
//   GitHub-style anchors.
//
// Built with componentize-js (see README.md).

import {
  defineTool, exportTools, host, InvalidArguments, Output, ToolError,
} from '../../guest-sdk/js/wasm-agent-tool.js';

const ALIGNMENTS = ['left', 'center', 'right'];
const NUMBER = /^[-+]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?%?$/;

/** Parses CSV text (RFC 4180 quoting, any line ending) into rows of strings. */
function parseCsv(text, delimiter) {
  const rows = [];
  let row = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (c === '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c === '"' && field === '') {
      quoted = true;
    } else if (c === delimiter) {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i += 1;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else {
      field += c;
    }
  }
  if (quoted) throw new ToolError('the CSV has a quoted field that is never closed');
  if (field !== '' || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows.filter((r) => r.length > 1 || r[0].trim() !== '');
}

/** The most frequent of , ; tab | in the first line, outside quotes. */
function sniffDelimiter(text) {
  const firstLine = text.split(/\r?\n/, 1)[0].replace(/"[^"]*"/g, '');
  let best = ',';
  let bestCount = 0;
  for (const candidate of [',', ';', '\t', '|']) {
    const count = firstLine.split(candidate).length - 1;
    if (count > bestCount) {
      best = candidate;
      bestCount = count;
    }
  }
  return best;
}

function cellText(value) {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  // A pipe would end the cell and a line break the row.
  return text.replace(/\|/g, '\\|').replace(/\r?\n/g, '<br>');
}

const width = (text) => [...text].length;

function pad(text, size, alignment) {
  const gap = size - width(text);
  if (alignment === 'right') return ' '.repeat(gap) + text;
  if (alignment === 'center') {
    const left = Math.floor(gap / 2);
    return ' '.repeat(left) + text + ' '.repeat(gap - left);
  }
  return text + ' '.repeat(gap);
}

function rule(size, alignment) {
  const dashes = Math.max(size, 3);
  if (alignment === 'center') return `:${'-'.repeat(dashes - 2)}:`;
  if (alignment === 'right') return `${'-'.repeat(dashes - 1)}:`;
  if (alignment === 'left') return `:${'-'.repeat(dashes - 1)}`;
  return '-'.repeat(dashes);
}

/** Header and body rows (strings) from the arguments. */
function tableFrom({ rows, csv, delimiter, has_header: hasHeader = true, columns }) {
  if ((rows === undefined) === (csv === undefined)) {
    throw new InvalidArguments('give exactly one of rows and csv');
  }
  let header;
  let body;
  if (csv !== undefined) {
    const parsed = parseCsv(csv, delimiter ?? sniffDelimiter(csv));
    if (parsed.length === 0) throw new ToolError('the CSV text has no rows');
    const widest = Math.max(...parsed.map((r) => r.length));
    header = hasHeader ? parsed.shift() : [];
    for (let i = header.length; i < widest; i += 1) header.push(`Column ${i + 1}`);
    body = parsed;
  } else if (rows.every((r) => Array.isArray(r))) {
    const widest = Math.max(0, ...rows.map((r) => r.length));
    body = rows.slice();
    header = hasHeader && body.length > 0 ? body.shift().map(cellText) : [];
    for (let i = header.length; i < widest; i += 1) header.push(`Column ${i + 1}`);
  } else if (rows.every((r) => r !== null && typeof r === 'object' && !Array.isArray(r))) {
    header = [...new Set(rows.flatMap((r) => Object.keys(r)))];
    body = rows.map((r) => header.map((key) => r[key]));
  } else {
    throw new ToolError('rows must be all objects or all arrays');
  }
  if (header.length === 0) throw new ToolError('the table has no columns');

  let picked = header.map((_, index) => index);
  if (columns) {
    picked = columns.map((name, position) => {
      const index = header.indexOf(name);
      if (index < 0) {
        throw new InvalidArguments(`/columns/${position}: there is no column ${JSON.stringify(name)}; the columns are `
          + header.map((h) => JSON.stringify(h)).join(', '));
      }
      return index;
    });
  }
  return {
    header: picked.map((index) => cellText(header[index])),
    body: body.map((r) => picked.map((index) => cellText(r[index]))),
  };
}

const markdownTable = defineTool({
  name: 'markdown_table',
  description: 'Lay out data as an aligned Markdown table. Give the data either as `rows` '
    + '(an array of objects, whose keys become the columns, or an array of arrays whose first '
    + 'row is the header) or as `csv` text. Numeric columns are right-aligned unless `align` '
    + 'says otherwise. Use it whenever an answer should contain a table.',
  parameters: {
    type: 'object',
    properties: {
      rows: {
        type: 'array',
        description: 'The rows: objects (keys are column names) or arrays (the first is the header).',
        items: { type: ['object', 'array'] },
      },
      csv: { type: 'string', description: 'The table as CSV text, instead of rows.' },
      delimiter: {
        type: 'string', minLength: 1, maxLength: 1,
        description: 'CSV field separator; detected from the first line when omitted.',
      },
      has_header: {
        type: 'boolean', default: true,
        description: 'Whether the first CSV line (or first array row) is the header.',
      },
      columns: {
        type: 'array', items: { type: 'string' }, minItems: 1,
        description: 'Which columns to show, in this order (default: all).',
      },
      align: {
        type: 'object',
        description: 'Alignment per column name: "left", "center" or "right". Other columns '
          + 'are right-aligned if all their values are numbers, else left-aligned.',
        additionalProperties: { enum: ALIGNMENTS },
      },
      default_align: {
        enum: ['auto', 'none', ...ALIGNMENTS], default: 'auto',
        description: 'Alignment of columns not named in align; "none" writes plain --- rules.',
      },
    },
    additionalProperties: false,
  },
  annotations: { readOnly: true, idempotent: true },
  run(args) {
    const { header, body } = tableFrom(args);
    const align = args.align ?? {};
    for (const name of Object.keys(align)) {
      if (!header.includes(cellText(name))) {
        throw new InvalidArguments(`/align/${name.replaceAll('~', '~0').replaceAll('/', '~1')}: `
          + 'the table has no such column');
      }
    }
    const fallback = args.default_align ?? 'auto';
    const alignments = header.map((name, index) => {
      if (Object.hasOwn(align, name)) return align[name];
      if (fallback !== 'auto') return fallback === 'none' ? undefined : fallback;
      const values = body.map((r) => r[index] ?? '').filter((v) => v.trim() !== '');
      return values.length > 0 && values.every((v) => NUMBER.test(v.trim())) ? 'right' : 'left';
    });
    const widths = header.map((name, index) => Math.max(3, width(name),
      ...body.map((r) => width(r[index] ?? ''))));
    const line = (cells) => `| ${cells.join(' | ')} |`;
    const lines = [
      line(header.map((name, i) => pad(name, widths[i], alignments[i]))),
      `|${widths.map((w, i) => `${rule(w + 2, alignments[i])}`).join('|')}|`,
      ...body.map((r) => line(widths.map((w, i) => pad(r[i] ?? '', w, alignments[i])))),
    ];
    host.debug(`table of ${body.length} rows x ${header.length} columns`);
    const markdown = lines.join('\n');
    return new Output(markdown).withBytes('markdown', 'text/markdown', markdown);
  },
});

// ASCII and common non-ASCII punctuation. (The engine has no Unicode property
// escapes such as \p{L}: StarlingMonkey is built without ICU.)
const PUNCTUATION = /[!-,./:-@[-^`{-~\u00a1-\u00bf\u00d7\u00f7\u2000-\u206f\u2e00-\u2e7f\u3000-\u303f\uff01-\uff0f]/g;

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to dashes. */
function slug(text, seen) {
  const base = text
    .toLowerCase()
    .replace(/<[^>]*>/g, '')
    .replace(PUNCTUATION, '')
    .replace(/ /g, '-');
  const count = seen.get(base) ?? 0;
  seen.set(base, count + 1);
  return count === 0 ? base : `${base}-${count}`;
}

/** Heading text without inline Markdown: links, emphasis, code ticks. */
function plainHeading(text) {
  return text
    .replace(/\s+#+\s*$/, '')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[*_`~]/g, '')
    .trim();
}

function headings(markdown) {
  const found = [];
  let fence = null;
  const lines = markdown.split(/\r?\n/);
  lines.forEach((line, index) => {
    const marker = line.match(/^\s{0,3}(`{3,}|~{3,})/);
    if (marker) {
      if (fence === null) fence = marker[1][0];
      else if (marker[1][0] === fence) fence = null;
      return;
    }
    if (fence !== null) return;
    const atx = line.match(/^\s{0,3}(#{1,6})\s+(.*)$/);
    if (atx) {
      found.push({ depth: atx[1].length, text: plainHeading(atx[2]) });
      return;
    }
    const next = lines[index + 1] ?? '';
    if (line.trim() !== '' && !/^\s{0,3}[-*>]/.test(line) && /^\s{0,3}(=+|-+)\s*$/.test(next)) {
      found.push({ depth: next.trim()[0] === '=' ? 1 : 2, text: plainHeading(line) });
    }
  });
  return found.filter((h) => h.text !== '');
}

const markdownToc = defineTool({
  name: 'markdown_toc',
  description: 'Make a table of contents for a Markdown document: a nested bullet list of its '
    + 'headings linked to GitHub-style anchors (#like-this). Headings inside code fences are '
    + 'ignored.',
  parameters: {
    type: 'object',
    properties: {
      markdown: { type: 'string', description: 'The Markdown document.' },
      min_depth: {
        type: 'integer', minimum: 1, maximum: 6, default: 1,
        description: 'Shallowest heading level to list (1 for #).',
      },
      max_depth: {
        type: 'integer', minimum: 1, maximum: 6, default: 3,
        description: 'Deepest heading level to list.',
      },
    },
    required: ['markdown'],
    additionalProperties: false,
  },
  annotations: { readOnly: true, idempotent: true },
  run({ markdown, min_depth: minDepth = 1, max_depth: maxDepth = 3 }) {
    if (minDepth > maxDepth) throw new InvalidArguments('min_depth must not be greater than max_depth');
    const seen = new Map();
    const all = headings(markdown).map((h) => ({ ...h, anchor: slug(h.text, seen) }));
    const listed = all.filter((h) => h.depth >= minDepth && h.depth <= maxDepth);
    if (listed.length === 0) {
      return `The document has no headings of level ${minDepth} to ${maxDepth}.`;
    }
    const top = Math.min(...listed.map((h) => h.depth));
    const toc = listed
      .map((h) => `${'  '.repeat(h.depth - top)}- [${h.text.replace(/([[\]])/g, '\\$1')}](#${h.anchor})`)
      .join('\n');
    return new Output(toc).withJson('headings', listed);
  },
});

export const tool = exportTools([markdownTable, markdownToc]);
