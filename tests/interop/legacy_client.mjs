// A 2025-11-25 client made with the TypeScript MCP SDK, the client VS Code resembles, in front of
// the bridge. It spawns the bridge over stdio, declares what VS Code declares (elicitation form and
// url, sampling, roots), answers the bridge's requests as VS Code would, carries out a plan and
// prints what it saw as one JSON object on stdout. The test that runs it makes the assertions.
//
// Usage: node legacy_client.mjs '<plan as JSON>'
//
// The plan:
//   {"command": "...", "args": [...], "cwd": "...", "timeoutMs": 20000 (for each request),
//    "exitMs": 10000 (for the exit of the bridge after the end of its stdin),
//    "listChanged": true (fetch each list again at its list change, as VS Code does),
//    "steps": [{"id": "...", "kind": "call" | "prompt" | "read" | "subscribe" | "unsubscribe" | "setLevel"
//               | "wait" | "stderr", "name": "...", "arguments": {...}, "uri": "...", "progress": true,
//               "level": "...", "method": "...", "text": "...", "ms": 10000}, ...]}
// A "wait" step waits (at most "ms") for a notification of "method" (and "uri") to have arrived, a
// "stderr" step for a line of the bridge's stderr with "text".
//
// The summary:
//   {"ok": true, "protocolVersion", "serverInfo", "capabilities", "instructions",
//    "tools": {"pages", "names", "cursorTypes", "invalidSchemas", "arraysWithoutItems"},
//    "prompts": [...names], "resources": [...uris],
//    "steps": {"<id>": {"text", "isError", "content", "messages", "contents", "progress", "error"}},
//    "requests": [{"method", "params"}], "events": [...], "exit": {"code", "signal"} or {"error"}}
// where "events" is the ordered list of the frames that arrived from the bridge, as
// "notification <method>", "request <method>" and "response <id>", and of the requests the client
// sent, as "sent <method>"; each step has the ids of the requests it sent ("requestIds").

import { pathToFileURL } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema
} from '@modelcontextprotocol/sdk/types.js';
import Ajv from 'ajv';
import { closeAndAwaitExit, runClient } from './exit.mjs';

const WHOLE_RUN_MS = 100000;

const plan = JSON.parse(process.argv[2]);
const REQUEST_TIMEOUT_MS = plan.timeoutMs ?? 20000;
const EXIT_MS = plan.exitMs ?? 10000;
const summary = { ok: false, protocolVersion: null, steps: {}, requests: [], notifications: [], events: [] };
let currentStep = null;

// Wraps the stdio transport to see every frame as it arrives, in order, and the version the
// client negotiated (the SDK tells it to transports that want it).
class Tap {
  constructor(inner) {
    this.inner = inner;
    inner.onmessage = (message, extra) => {
      if ('method' in message) {
        const kind = 'id' in message ? 'request' : 'notification';
        summary.events.push(`${kind} ${message.method}`);
        if (kind === 'notification') summary.notifications.push({ method: message.method, params: message.params ?? null });
      } else {
        summary.events.push(`response ${message.id}`);
      }
      this.onmessage?.(message, extra);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => this.onerror?.(error);
  }
  start() {
    return this.inner.start();
  }
  send(message, options) {
    if ('method' in message && 'id' in message) {
      summary.events.push(`sent ${message.method}`);
      if (currentStep !== null) currentStep.requestIds.push(message.id);
    }
    return this.inner.send(message, options);
  }
  close() {
    return this.inner.close();
  }
  setProtocolVersion(version) {
    summary.protocolVersion = version;
  }
}

// ------------------------------------------------------------- answers like VS Code

function fillForm(schema) {
  const content = {};
  for (const [name, property] of Object.entries(schema?.properties ?? {})) {
    if (Array.isArray(property.enum)) content[name] = property.enum[0];
    else if (Array.isArray(property.oneOf)) content[name] = property.oneOf[0].const;
    else if (property.type === 'string') content[name] = 'Ada';
    else if (property.type === 'integer' || property.type === 'number') {
      let value = 36;
      if (typeof property.minimum === 'number') value = Math.max(value, property.minimum);
      if (typeof property.maximum === 'number') value = Math.min(value, property.maximum);
      content[name] = value;
    } else if (property.type === 'boolean') content[name] = true;
  }
  return content;
}

// Walk a schema and count the array nodes without a truthy "items" (VS Code's chat refuses them).
function arraysWithoutItems(node) {
  if (Array.isArray(node)) return node.reduce((n, item) => n + arraysWithoutItems(item), 0);
  if (node === null || typeof node !== 'object') return 0;
  let count = node.type === 'array' && !node.items ? 1 : 0;
  for (const value of Object.values(node)) count += arraysWithoutItems(value);
  return count;
}

// ----------------------------------------------------------------------- the run

async function main() {
  const transport = new StdioClientTransport({
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

  // As VS Code: a list change makes the client fetch that list again, at once.
  const refetch = { autoRefresh: true, debounceMs: 0, onChanged: () => {} };
  const client = new Client(
    { name: 'Visual Studio Code', version: '1.140.0' },
    {
      capabilities: {
        roots: { listChanged: true },
        sampling: {},
        elicitation: { form: {}, url: {} }
      },
      ...(plan.listChanged ? { listChanged: { tools: refetch, prompts: refetch, resources: refetch } } : {})
    }
  );

  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    summary.requests.push({ method: request.method, params: request.params });
    if (request.params.mode === 'url') return { action: 'accept' };
    return { action: 'accept', content: fillForm(request.params.requestedSchema) };
  });
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    summary.requests.push({ method: request.method, params: request.params });
    return {
      role: 'assistant',
      content: { type: 'text', text: 'hello' },
      model: 'interop-model',
      stopReason: 'endTurn'
    };
  });
  client.setRequestHandler(ListRootsRequestSchema, async (request) => {
    summary.requests.push({ method: request.method, params: request.params ?? null });
    return { roots: [{ uri: pathToFileURL(plan.cwd).href, name: 'workspace' }] };
  });
  client.fallbackNotificationHandler = async () => {};

  await client.connect(new Tap(transport), { timeout: REQUEST_TIMEOUT_MS });
  const child = transport._process;
  summary.serverInfo = client.getServerVersion() ?? null;
  summary.capabilities = client.getServerCapabilities() ?? null;
  summary.instructions = client.getInstructions() ?? null;

  // Tools, page by page, with the raw cursor types seen.
  const ajv = new Ajv({ strict: false, allErrors: true });
  const tools = { pages: 0, names: [], cursorTypes: [], invalidSchemas: [], arraysWithoutItems: 0 };
  let cursor;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: REQUEST_TIMEOUT_MS });
    tools.pages += 1;
    for (const tool of page.tools) {
      tools.names.push(tool.name);
      const schema = { properties: {}, ...tool.inputSchema };
      if (!ajv.validateSchema(schema)) tools.invalidSchemas.push(tool.name);
      tools.arraysWithoutItems += arraysWithoutItems(tool.inputSchema);
    }
    tools.cursorTypes.push('nextCursor' in page ? (page.nextCursor === null ? 'null' : typeof page.nextCursor) : 'absent');
    cursor = typeof page.nextCursor === 'string' ? page.nextCursor : undefined;
  } while (cursor !== undefined && tools.pages < 50);
  summary.tools = tools;

  if (summary.capabilities?.prompts) {
    summary.prompts = (await client.listPrompts({}, { timeout: REQUEST_TIMEOUT_MS })).prompts.map((p) => p.name);
  }
  if (summary.capabilities?.resources) {
    summary.resources = (await client.listResources({}, { timeout: REQUEST_TIMEOUT_MS })).resources.map((r) => r.uri);
  }

  for (const step of plan.steps) {
    const record = { requestIds: [] };
    summary.steps[step.id] = record;
    currentStep = record;
    try {
      if (step.kind === 'call') {
        const progress = [];
        const options = { timeout: REQUEST_TIMEOUT_MS };
        if (step.progress) options.onprogress = (p) => progress.push(p);
        const result = await client.callTool(
          { name: step.name, arguments: step.arguments ?? {} },
          CallToolResultSchema,
          options
        );
        record.isError = result.isError ?? false;
        record.content = result.content;
        record.text = result.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
        if (step.progress) {
          // The SDK runs notification handlers a tick late and drops a progress notification that
          // shares a read with the response: count the frames themselves, and the callbacks apart.
          record.progressCallbacks = progress.length;
          record.progress = summary.notifications
            .filter((n) => n.method === 'notifications/progress' && record.requestIds.includes(n.params?.progressToken))
            .map((n) => n.params);
        }
      } else if (step.kind === 'prompt') {
        const result = await client.getPrompt(
          { name: step.name, arguments: step.arguments ?? {} },
          { timeout: REQUEST_TIMEOUT_MS }
        );
        record.messages = result.messages;
        record.text = result.messages.map((m) => m.content?.text ?? '').join('\n');
      } else if (step.kind === 'read') {
        const result = await client.readResource({ uri: step.uri }, { timeout: REQUEST_TIMEOUT_MS });
        record.contents = result.contents;
        record.text = result.contents.map((c) => c.text ?? '').join('\n');
      } else if (step.kind === 'subscribe') {
        record.result = await client.subscribeResource({ uri: step.uri }, { timeout: REQUEST_TIMEOUT_MS });
      } else if (step.kind === 'setLevel') {
        record.result = await client.setLoggingLevel(step.level, { timeout: REQUEST_TIMEOUT_MS });
      } else if (step.kind === 'wait') {
        // Wait for a notification (of the step's method, and uri if given) that arrived at any time.
        const seen = () =>
          summary.notifications.some(
            (n) => n.method === step.method && (step.uri === undefined || n.params?.uri === step.uri)
          );
        const deadline = Date.now() + (step.ms ?? 10000);
        while (!seen() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        record.seen = seen();
      } else if (step.kind === 'stderr') {
        const deadline = Date.now() + (step.ms ?? 10000);
        while (!stderr.includes(step.text) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        record.seen = stderr.includes(step.text);
      } else if (step.kind === 'unsubscribe') {
        record.result = await client.unsubscribeResource({ uri: step.uri }, { timeout: REQUEST_TIMEOUT_MS });
      } else {
        throw new Error(`unknown step kind ${step.kind}`);
      }
    } catch (error) {
      record.error = { code: error.code ?? null, message: String(error.message ?? error), data: error.data ?? null };
    }
    currentStep = null;
  }

  // The end of stdin ends the bridge: how it exits, within plan.exitMs.
  summary.exit = await closeAndAwaitExit(client, child, EXIT_MS);
  summary.stderrLines = stderr.split('\n').filter((line) => line.length > 0).length;
  summary.ok = true;
}

runClient(summary, WHOLE_RUN_MS, main);
