"""Tree policy: the draft tree's shape from the syntax at the cursor, its size from the measured cost of verification."""
