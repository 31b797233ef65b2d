"""Session stage: a capture's files on disk, its manifest, and the derived tables beside them."""
