// A 2025-era server on stdio, written with the TypeScript SDK, that offers some tools only to a
// client that declared the capability they need, as @modelcontextprotocol/server-everything does:
// it registers them when notifications/initialized arrives, from the client's capabilities.
//
// Usage: node capability_server.mjs
//
// What it offers: the tool "always"; "roots" (client capability roots), "sampling" (sampling),
// "elicit_form" (elicitation, form mode), "elicit_url" (elicitation, URL mode); the resource
// template "note://{name}" and no resource.

import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

const server = new McpServer({ name: 'capability-server', version: '1.0.0' });
const text = (value) => ({ content: [{ type: 'text', text: value }] });

server.registerTool('always', { description: 'A tool for every client' }, async () => text('always'));
server.registerResource(
  'note',
  new ResourceTemplate('note://{name}', { list: undefined }),
  { mimeType: 'text/plain' },
  async (uri, { name }) => ({ contents: [{ uri: uri.href, text: `note ${name}` }] })
);

server.server.oninitialized = () => {
  const capabilities = server.server.getClientCapabilities() ?? {};
  if (capabilities.roots) {
    server.registerTool('roots', { description: 'Needs roots' }, async () => text('roots'));
  }
  if (capabilities.sampling) {
    server.registerTool('sampling', { description: 'Needs sampling' }, async () => text('sampling'));
  }
  if (capabilities.elicitation) {
    server.registerTool('elicit_form', { description: 'Needs form elicitation' }, async () => text('form'));
  }
  if (capabilities.elicitation?.url) {
    server.registerTool('elicit_url', { description: 'Needs URL elicitation' }, async () => text('url'));
  }
};

await server.connect(new StdioServerTransport());
