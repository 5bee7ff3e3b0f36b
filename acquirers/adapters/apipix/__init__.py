"""Acquirers in the API Pix style: Banco Central's API Pix (v2) and the
dialects PSPs build on it (mTLS, OAuth2 client credentials, RFC 7807 problems).

The adapters:

- :mod:`.bacen` (``bacen_pix``): cash-in through any PSP implementing the API Pix;
- :mod:`.efi` (``efi_pix``): cash-out through Efí's "send Pix" extension.

What they share, each in its module:

- :mod:`.options`: the connection options staff save (validated, secrets only
  as environment variable *names*);
- :mod:`.credentials`: those options resolved against the environment (client
  secret, mTLS certificate and key as files);
- :mod:`.auth`: the OAuth2 client-credentials token and its shared cache;
- :mod:`.client`: :class:`~.client.ApiClient`, one logical call (retries where
  safe, answers mapped to adapter errors);
- :mod:`.problems`: RFC 7807 problems and the HTTP errors that carry them;
- :mod:`.callbacks`: the ``{webhookUrl}/pix`` callback (URL token, entries);
- :mod:`.formats`: the API's values (``"12.34"``, RFC 3339 moments, end-to-end ids).

An adapter validates its options with :func:`.options.clean_connection_options`,
builds a client with :func:`.client.client_for` and calls
:meth:`.client.ApiClient.request`.
"""
