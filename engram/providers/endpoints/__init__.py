"""Calling an endpoint the user configured, whatever it speaks: the transport shared by LLM tasks and embedders.

`wire` holds the wire-neutral values (Request, Sampling, Completion, CallFailed); `adapters` turns them into the
body of each apiType and reads its answers and streams (pure); `client.EndpointClient` sends them with the
endpoint's retries, timeout, headers, key and concurrency limit.
"""
