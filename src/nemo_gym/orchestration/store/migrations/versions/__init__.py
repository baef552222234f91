"""The store's schema versions, oldest first (each names the one before it)."""
