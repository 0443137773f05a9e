"""The sign-in at an upstream server at a URL: OAuth 2.1 with PKCE, token stores and logout.

Modules:

* :mod:`.config`: the options of the sign-in, the kinds of client registration, the
  options of one upstream URL.
* :mod:`.identity`: the pure names of the bridge in the stored sign-ins (the record's client).
* :mod:`.stored`: the pure stored form of a sign-in: the record, its key, the index, their JSON.
* :mod:`.flow`: pure rules (identity, PKCE, records, metadata checks, scopes, the redirect).
* :mod:`.urls`: pure URL checks and the well-known URLs of the metadata.
* :mod:`.challenge`: the pure reading of the ``WWW-Authenticate`` challenge.
* :mod:`.tokens`: pure rules of the registration, the client's authentication and the tokens.
* :mod:`.grants`: pure rules of the flow choice, the device grant and client credentials.
* :mod:`.errors`: the errors of the sign-in, one class per cause of the error table.
* :mod:`.web`: the HTTP client of the sign-in (metadata, registration, tokens).
* :mod:`.discovery`: protected resource and authorization server metadata, registration,
  token requests.
* :mod:`.receiver`: the loopback receiver of the redirect and the one-time start URL.
* :mod:`.signin`: a person's sign-in: its settings, the gate, the browser opener, the consent.
* :mod:`.attempt`: one attempt of it: the receiver on the redirect port, the sign-in line, the wait.
* :mod:`.device`: one device sign-in (RFC 8628): the code, the person, the polling.
* :mod:`.tokenstore`: the contract of a token store; the memory store.
* :mod:`.keychain`: the token store in the keychain of the host.
* :mod:`.filestore`: the token store in encrypted files.
* :mod:`.store`: which token store opens, the fallback between them, and their index.
* :mod:`.records`: the sign-in in use and its records in the token store.
* :mod:`.busy`: one sign-in or refresh at a time.
* :mod:`.requestscope`: the request on each thread of the authorizer, and the sign-in's HTTP
  client within it.
* :mod:`.context`: what every step of the sign-ins of one upstream URL shares.
* :mod:`.metadata`: the discovered servers of an upstream URL and the flow chosen for each.
* :mod:`.clients`: the client of a sign-in and its secret.
* :mod:`.tokenrequests`: the refresh, the client credentials grant, the storing of new tokens.
* :mod:`.interactive`: a person's sign-in, in the browser or with the device flow.
* :mod:`.steps`: the answer to a challenge and a due refresh, made at the first one.
* :mod:`.authorizer`: the :class:`~mcpbridge.mcp.transports.http.Authorizer` of the HTTP transport.
* :mod:`.session`: the client of the bridge whose requests carry their scope, and the setup.

``keyring`` and ``cryptography`` are imported only by the stores that need them.
"""
