// The official MCP TypeScript SDK as a client of `wasm-agent serve`, for
// tests/mcp/test_cold_start.py and test_http_wire.py. Usage:
//   node client.mjs CALL_JSON -- SERVER_COMMAND [ARGS...]   (stdio)
//   node client.mjs CALL_JSON -- http://HOST:PORT/mcp       (streamable HTTP)
// CALL_JSON is {"name": ..., "arguments": {...}}. Prints one JSON line: the
// times to `initialize` and to the first `tools/list`, the tools it listed,
// the tool counts the SDK's own list-changed refresh saw, and the call's
// result (made once the tool is listed, by the first listing or a refresh).
// With ELICIT=DECISION in the environment, the client declares elicitation
// and answers every question with that decision (`decline` declines); the
// questions asked are printed too. With MCP_BEARER=TOKEN, HTTP requests carry
// it as a bearer token.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const separator = process.argv.indexOf('--');
const call = JSON.parse(process.argv[2]);
const [command, ...args] = process.argv.slice(separator + 1);

const refreshed = [];
let refreshedNames = [];
const elicit = process.env.ELICIT;
const elicited = [];
const client = new Client(
  { name: 'wasm-agent-tests', version: '0' },
  {
    capabilities: elicit ? { elicitation: { form: {} } } : {},
    listChanged: {
      tools: {
        onChanged: (error, tools) => {
          refreshed.push(error ? String(error) : tools.length);
          if (!error) refreshedNames = tools.map((tool) => tool.name);
        },
      },
    },
  },
);
if (elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicited.push(request.params.message);
    return elicit === 'decline' ? { action: 'decline' } : { action: 'accept', content: { decision: elicit } };
  });
}
const transport = /^https?:\/\//.test(command)
  ? new StreamableHTTPClientTransport(new URL(command), {
      requestInit: process.env.MCP_BEARER
        ? { headers: { Authorization: `Bearer ${process.env.MCP_BEARER}` } }
        : undefined,
    })
  : new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
const started = performance.now();
await client.connect(transport);
const initializeMs = performance.now() - started;
// The SDK's default request timeout (60 s) applies, as for any user.
const listing = await client.listTools();
const listMs = performance.now() - started;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const deadline = performance.now() + 90_000;
while (!listing.tools.some((tool) => tool.name === call.name) && !refreshedNames.includes(call.name)) {
  if (performance.now() > deadline) throw new Error(`${call.name} was never listed`);
  await sleep(50);
}
const result = await client.callTool(call);
// Give a list-changed refresh (debounced by the SDK) time to happen.
await sleep(1500);
console.log(
  JSON.stringify({
    initializeMs,
    listMs,
    protocolVersion: transport._protocolVersion ?? null,
    server: client.getServerVersion(),
    tools: listing.tools.map((tool) => tool.name),
    result,
    refreshed,
    elicited,
  }),
);
await client.close();
