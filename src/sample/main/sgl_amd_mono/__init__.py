"""Per-model AMD monokernels."""
