"""One module per built-in model, named as users type the model (gpt-realtime: gpt_realtime.py).
The registry (models/__init__.py) imports one only when its name is asked for."""
