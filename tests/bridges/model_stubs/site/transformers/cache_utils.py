# transformers.cache_utils as Voila's model.py reads it: transformers 4.51.3's DynamicCache
# still has seen_tokens (4.57 and 5.x do not).
class DynamicCache:
    seen_tokens = 0
