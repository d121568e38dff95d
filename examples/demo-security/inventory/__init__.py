"""A tiny stock-keeping library."""
