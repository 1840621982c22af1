"""Python client for llmlimitd: reserve capacity across several limits before
an LLM call, reconcile after it. Standard library only, Python 3.9+.

    from llmlimit import Client, Denied
    client = Client("http://127.0.0.1:8470", token="...")
    with client.acquire({"global:llm:openai:gpt-4o:tpm": 1200}, deadline_s=30) as lease:
        ...  # the LLM call
        lease.actual("global:llm:openai:gpt-4o:tpm", 950)
"""

from ._protocol import (
    ApiError,
    CompleteResult,
    Denied,
    LlmlimitError,
    ReserveResult,
    TransportError,
    Unavailable,
    Usage,
    new_lease_id,
)
from .aio import AsyncClient, AsyncLease
from .client import Client, Lease

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncLease",
    "Client",
    "CompleteResult",
    "Denied",
    "Lease",
    "LlmlimitError",
    "ReserveResult",
    "TransportError",
    "Unavailable",
    "Usage",
    "new_lease_id",
]
