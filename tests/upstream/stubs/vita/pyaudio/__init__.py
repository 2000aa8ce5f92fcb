"""PyAudio (a microphone binding, PortAudio) is imported by web_demo/wakeup_and_vad and never
used by the server."""
