"""Auto-link (DESIGN §9): hidden relations become visible [[links]] in the notes themselves."""
