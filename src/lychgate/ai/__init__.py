"""The AI gateway's extension: what Envoy cannot do for LLM traffic.

Envoy carries the traffic (TLS to providers, retries, failover between priority
groups); this package runs beside it as an ext_proc server in Envoy's upstream
filter chain of an AI Backend's cluster, once per attempt, with the provider
Envoy picked for that attempt (its endpoint metadata names it):

- `providers/`: one module per LLM provider, translating OpenAI's Chat Completions
  request to the provider's native API and the answer (whole or streamed) back;
- `config.py`: what the control plane hands the extension (providers with their
  resolved credentials, route settings), kept out of Envoy's configuration so
  keys never reach xDS or its snapshots;
- guards, prompt enrichment, defaults and token accounting (one module each).

The translator (lychgate.translate / lychgate.xds) only wires Envoy to it.
"""
