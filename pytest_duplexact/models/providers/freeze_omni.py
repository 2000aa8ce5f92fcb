"""``--duplexact-model=freeze-omni``: Freeze-Omni's socket.io demo server (bin/server.py), spoken
by the shared socket.io adapter (socketio_omni.py holds what it shares with its sibling)."""

from .socketio_omni import freeze_omni

factory = freeze_omni
