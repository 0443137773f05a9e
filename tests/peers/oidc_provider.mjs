// A certified OpenID provider (the npm package oidc-provider) with its stock policy and its
// stock development interactions (a login form and a consent form), and beside it an MCP
// 2026-07-28 endpoint that accepts the provider's access tokens.
//
// One TLS port on 127.0.0.1 serves:
//   /.well-known/openid-configuration and the provider's endpoints (issuer https://127.0.0.1:<port>)
//   /.well-known/oauth-protected-resource/mcp   RFC 9728 metadata of /mcp (scope "mcp")
//   POST /mcp                                   server/discover, tools/list, tools/call (whoami)
//   GET /test/state                             for the test: the live access tokens, the grants
//                                               of the token endpoint, every token issued
//
// Environment: OIDC_CERT and OIDC_KEY (PEM files of the server certificate), OIDC_REDIRECT_URI
// (of the test client "mcp-bridge-test", a public native client), OIDC_ACCESS_TTL (seconds).
// The first line on stdout is {"port": <port>}.

import { readFileSync } from 'node:fs';
import https from 'node:https';

import Provider, { errors } from 'oidc-provider';

const ttl = Number(process.env.OIDC_ACCESS_TTL);
const server = https.createServer({
  cert: readFileSync(process.env.OIDC_CERT),
  key: readFileSync(process.env.OIDC_KEY),
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const issuer = `https://127.0.0.1:${port}`;
const resource = `${issuer}/mcp`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'mcp-bridge-test',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      redirect_uris: [process.env.OIDC_REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
  ],
  cookies: { keys: ['mcpbridge-test-cookie-key'] },
  // An access token ends at its expiry (the stock tolerance adds 15 s).
  clockTolerance: 0,
  findAccount: (_ctx, accountId) => ({ accountId, claims: () => ({ sub: accountId }) }),
  features: {
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (indicator !== resource) throw new errors.InvalidTarget();
        return { scope: 'mcp', accessTokenTTL: ttl, accessTokenFormat: 'opaque' };
      },
    },
  },
});

const issued = [];
const accessTokens = [];
const grants = [];
for (const kind of ['access_token', 'refresh_token', 'authorization_code']) {
  provider.on(`${kind}.saved`, (token) => {
    issued.push(token.jti);
    if (kind === 'access_token') accessTokens.push(token.jti);
  });
}

// The access tokens that the provider still accepts (it finds no expired one).
async function live() {
  const found = await Promise.all(accessTokens.map((jti) => provider.AccessToken.find(jti)));
  return found.filter(Boolean).length;
}
provider.on('grant.success', (ctx) => grants.push(ctx.oidc.params.grant_type));

function send(res, status, body, headers = {}) {
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(data);
}

const DISCOVER = {
  resultType: 'complete',
  supportedVersions: ['2026-07-28'],
  capabilities: { tools: {} },
  ttlMs: 0,
  cacheScope: 'public',
  _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'oidc-provider-peer', version: '1.0' } },
};
const TOOLS = [{ name: 'whoami', inputSchema: { type: 'object' } }];

async function mcp(req, res) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const message = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const bearer = (req.headers.authorization || '').replace(/^Bearer /, '');
  const token = bearer ? await provider.AccessToken.find(bearer) : undefined;
  if (!token || !token.scopes.has('mcp')) {
    const challenge = `Bearer resource_metadata="${issuer}/.well-known/oauth-protected-resource/mcp", scope="mcp"`;
    send(res, 401, '', { 'WWW-Authenticate': challenge, 'Content-Type': 'text/plain' });
    return;
  }
  if (!('id' in message)) {
    send(res, 202, '', { 'Content-Type': 'text/plain' });
    return;
  }
  const answer = (result) => send(res, 200, { jsonrpc: '2.0', id: message.id, result });
  if (message.method === 'server/discover') {
    answer(DISCOVER);
  } else if (message.method === 'tools/list') {
    answer({ resultType: 'complete', tools: TOOLS, ttlMs: 0, cacheScope: 'public' });
  } else if (message.method === 'tools/call') {
    answer({ resultType: 'complete', content: [{ type: 'text', text: `account: ${token.accountId}` }] });
  } else {
    send(res, 200, { jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } });
  }
}

const handle = provider.callback();
server.on('request', (req, res) => {
  const path = req.url.split('?')[0];
  if (req.method === 'GET' && path === '/.well-known/oauth-protected-resource/mcp') {
    send(res, 200, { resource, authorization_servers: [issuer], scopes_supported: ['mcp'] });
  } else if (req.method === 'GET' && path === '/test/state') {
    live().then((count) => send(res, 200, { live: count, grants, issued }));
  } else if (req.method === 'POST' && path === '/mcp') {
    mcp(req, res).catch(() => send(res, 500, ''));
  } else {
    handle(req, res);
  }
});

process.stdout.write(`${JSON.stringify({ port })}\n`);
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
