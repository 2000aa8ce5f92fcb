"""Recording -> Timeline: voice activity (vad.py, activity.py), segments with their words
(segmentation.py) and the transcribers that supply words when a model gives none."""
