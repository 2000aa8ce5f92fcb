"""What the built-in adapters share: HTTP and WebSocket plumbing, a server session's event
queue, PCM, words from a text stream, playback of stored speech."""
