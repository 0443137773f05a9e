// A client of MCP 2025-06-18 made with the TypeScript MCP SDK 1.24.0 (the newest release whose
// latest revision is 2025-06-18), in front of the bridge. It spawns the bridge over stdio, lists
// the tools, calls one and prints what it saw as one JSON object on stdout; the test that runs it
// makes the assertions.
//
// Usage: node old_client.mjs '<plan as JSON>'
//
// The plan: {"command": "...", "args": [...], "cwd": "...", "tool": "echo", "arguments": {...}}
// The summary: {"ok": true, "latestProtocolVersion", "protocolVersion", "serverInfo",
//               "tools": [...names], "text": "..."}, or {"ok": false, "error": "...", "stderr": "..."}

import { Client } from 'sdk-1-24/client/index.js';
import { StdioClientTransport } from 'sdk-1-24/client/stdio.js';
import { LATEST_PROTOCOL_VERSION } from 'sdk-1-24/types.js';
import { runClient } from './exit.mjs';

const WHOLE_RUN_MS = 60000;
const plan = JSON.parse(process.argv[2]);
const summary = { ok: false, latestProtocolVersion: LATEST_PROTOCOL_VERSION, protocolVersion: null };

// Keeps the revision that the client negotiated (the SDK tells it to a transport that wants it).
class Tap extends StdioClientTransport {
  setProtocolVersion(version) {
    summary.protocolVersion = version;
  }
}

async function main() {
  const transport = new Tap({
    command: plan.command,
    args: plan.args,
    cwd: plan.cwd,
    env: { ...process.env },
    stderr: 'pipe'
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => {
    stderr += chunk.toString();
  });
  const client = new Client({ name: 'sdk-1-24-client', version: '1.24.0' }, { capabilities: {} });
  try {
    await client.connect(transport);
    summary.serverInfo = client.getServerVersion();
    summary.tools = (await client.listTools()).tools.map((tool) => tool.name);
    const result = await client.callTool({ name: plan.tool, arguments: plan.arguments });
    summary.text = result.content.filter((block) => block.type === 'text').map((block) => block.text).join('\n');
    await client.close();
    summary.ok = true;
  } catch (error) {
    summary.error = String(error?.message ?? error);
    summary.stderr = stderr.slice(-2000);
  }
}

runClient(summary, WHOLE_RUN_MS, main);
