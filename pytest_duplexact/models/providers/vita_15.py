"""``--duplexact-model=vita-1.5``: VITA-1.5's socket.io web demo (web_demo/server.py), spoken by
the shared socket.io adapter (socketio_omni.py holds what it shares with its sibling)."""

from .socketio_omni import vita_15

factory = vita_15
