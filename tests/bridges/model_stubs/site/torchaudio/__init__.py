# The import name Voila's voila_tokenizer.py and spkr.py import (the Voila bridge checks it is
# there); the bridge reads --ref-audio with soundfile, not torchaudio.load.
