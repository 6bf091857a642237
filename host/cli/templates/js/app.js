// {{name}}: a wasm-agent tool in JavaScript, built with componentize-qjs.
//
// Each tool has a name, a description for the model, a JSON Schema for its
// arguments (checked before `run` is called) and `run`, which returns a
// string or an Output, or throws a ToolError the model should read.

import { defineTool, exportTools, Output, ToolError, host } from './wasm-agent-tool.js';

const slugify = defineTool({
  name: 'slugify',
  description: 'Turn a title into a URL slug: lower case, words joined by "-".',
  parameters: {
    type: 'object',
    properties: {
      text: { type: 'string', description: 'The title.' },
      maxLength: { type: 'integer', description: 'Cut the slug to this many characters.' },
    },
    required: ['text'],
    additionalProperties: false,
  },
  annotations: { readOnly: true, idempotent: true },
  run({ text, maxLength }) {
    const words = text.toLowerCase().match(/[a-z0-9]+/g) ?? [];
    if (words.length === 0) {
      throw new ToolError(`"${text}" has no letters or digits to make a slug of`);
    }
    let slug = words.join('-');
    if (maxLength !== undefined) slug = slug.slice(0, maxLength).replace(/-+$/, '');
    host.info(`slug of ${words.length} words`);
    return new Output(slug).withJson('words', words);
  },
});

export const tool = exportTools([slugify]);
