"""State shared by replicas on Redis: the answer cache, the global rate limit and invalidation."""
