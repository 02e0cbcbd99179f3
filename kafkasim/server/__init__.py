"""The wire-protocol front end: real Kafka clients talk to a kafkasim Broker over TCP.

Modules, one job each (docs/server.md draws the architecture):

- ``codec``          frames ⟷ typed requests/responses (kio, generated from Kafka's schemas)
- ``api``            the dispatch table (one handler per API key), handler context, error codes
- ``apis_admin`` / ``apis_data`` / ``apis_groups``   the handlers
- ``cluster``        what Metadata says the cluster looks like
- ``server``         the asyncio TCP server (framing, size limit, dispatch)
- ``runner``         run in the foreground: signals, address file, clean shutdown

Importing this package is cheap; the server modules load on first use.
"""

from kafkasim._lazy import lazy_exports

__all__ = ["KafkaServer", "serve", "ServerOptions"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "KafkaServer": "kafkasim.server.server",
    "serve": "kafkasim.server.runner",
    "ServerOptions": "kafkasim.server.api",
})
